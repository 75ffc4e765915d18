"""``dump-log``'s internal-record decoders: Kafka's field names, both layouts, tombstones and
undecodable records."""

from __future__ import annotations

import json

from oncelog.cli.internal_records import describe_offsets_record, describe_txn_record
from oncelog.group.offsets_codec import (
    GroupValue,
    MemberValue,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from oncelog.txn.log_codec import encode_key, encode_value
from oncelog.txn.metadata import TransactionMetadata, TxnState

from ..legacy_layouts import legacy_offset_key, legacy_offset_value, legacy_txn_value


def test_offset_commit_records() -> None:
    key, payload = describe_offsets_record(
        encode_offset_key("g", "t", 2), encode_offset_value(OffsetValue(5, 1, "m", 10, None))
    )
    assert json.loads(key) == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 2}}
    assert json.loads(payload) == {
        "version": "3",
        "data": {"offset": 5, "leaderEpoch": 1, "metadata": "m", "commitTimestamp": 10},
    }
    key, payload = describe_offsets_record(
        legacy_offset_key("g", "t", 2), legacy_offset_value(OffsetValue(5, -1, "", 10, 20))
    )
    assert json.loads(key)["type"] == "legacy"
    assert json.loads(payload) == {
        "version": "legacy",
        "data": {
            "offset": 5,
            "leaderEpoch": -1,
            "metadata": "",
            "commitTimestamp": 10,
            "expireTimestamp": 20,
        },
    }
    assert describe_offsets_record(encode_offset_key("g", "t", 2), None)[1] == "<DELETE>"


def test_group_metadata_records() -> None:
    v = GroupValue(
        "consumer", 3, "range", "m", 7, (MemberValue("m", None, "c", "/h", 1, 2, b"s", b"a"),)
    )
    key, payload = describe_offsets_record(encode_group_key("g"), encode_group_value(v))
    assert json.loads(key) == {"type": "2", "data": {"group": "g"}}
    assert json.loads(payload) == {
        "version": "3",
        "data": {
            "protocolType": "consumer",
            "generation": 3,
            "protocol": "range",
            "leader": "m",
            "currentStateTimestamp": 7,
            "members": [
                {
                    "memberId": "m",
                    "groupInstanceId": None,
                    "clientId": "c",
                    "clientHost": "/h",
                    "rebalanceTimeout": 1,
                    "sessionTimeout": 2,
                    "subscription": "cw==",
                    "assignment": "YQ==",
                }
            ],
        },
    }


def test_undecodable_and_unknown_records() -> None:
    assert describe_offsets_record(b"\x00\x07x", b"abc") == (
        "<undecodable: unknown __consumer_offsets key version 7>",
        "<3 bytes>",
    )
    key, payload = describe_txn_record(b"\x00\x01", None)
    assert key.startswith("<undecodable") and payload == ""


def test_transaction_log_records() -> None:
    m = TransactionMetadata(
        "tx", 42, 41, 7, 6, 60_000, TxnState.ONGOING, {("t", 1), ("t", 0)}, 100, 200
    )
    expected = {
        "producerId": 42,
        "previousProducerId": 41,
        "producerEpoch": 7,
        "lastProducerEpoch": 6,
        "transactionTimeoutMs": 60_000,
        "transactionStatus": 1,
        "transactionPartitions": [{"topic": "t", "partitionIds": [0, 1]}],
        "transactionLastUpdateTimestampMs": 200,
        "transactionStartTimestampMs": 100,
    }
    key, payload = describe_txn_record(encode_key("tx"), encode_value(m))
    assert json.loads(key) == {"type": "0", "data": {"transactionalId": "tx"}}
    assert json.loads(payload) == {"version": "1", "data": expected}
    _, payload = describe_txn_record(encode_key("tx"), legacy_txn_value(m))
    assert json.loads(payload) == {"version": "legacy", "data": expected}
    assert describe_txn_record(encode_key("tx"), None) == (key, "<DELETE>")
