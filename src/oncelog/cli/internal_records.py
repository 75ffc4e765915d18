"""Internal-topic records as ``dump-log --offsets-decoder`` / ``--transaction-log-decoder``
print them, like Kafka's: ``{"type": <key version>, "data": {...}}`` for a key and
``{"version": <value version>, "data": {...}}`` for a value, with the field names of Kafka's
schemas; ``<DELETE>`` for a tombstone. Records in oncelog's legacy layout say
``"legacy"`` as their type/version. A record that does not decode is shown as such."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from oncelog.group.offsets_codec import (
    GroupKey,
    GroupValue,
    OffsetsCodecError,
    OffsetValue,
    decode_record,
)
from oncelog.txn.log_codec import TxnLogCodecError, decode_key, decode_value, is_legacy_value

DELETE = "<DELETE>"


def _version(data: bytes) -> int | None:
    return struct.unpack_from(">h", data)[0] if len(data) >= 2 else None


def _json(kind: str, version: object, data: dict[str, Any]) -> str:
    return json.dumps({kind: str(version), "data": data}, ensure_ascii=False)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _offset_value(v: OffsetValue) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": v.offset,
        "leaderEpoch": v.leader_epoch,
        "metadata": v.metadata,
        "commitTimestamp": v.commit_timestamp_ms,
    }
    if v.expire_timestamp_ms is not None:
        out["expireTimestamp"] = v.expire_timestamp_ms
    return out


def _group_value(v: GroupValue) -> dict[str, Any]:
    return {
        "protocolType": v.protocol_type or "",
        "generation": v.generation_id,
        "protocol": v.protocol_name,
        "leader": v.leader_id,
        "currentStateTimestamp": -1 if v.state_timestamp_ms is None else v.state_timestamp_ms,
        "members": [
            {
                "memberId": m.member_id,
                "groupInstanceId": m.group_instance_id,
                "clientId": m.client_id,
                "clientHost": m.client_host,
                "rebalanceTimeout": m.rebalance_timeout_ms,
                "sessionTimeout": m.session_timeout_ms,
                "subscription": _b64(m.subscription),
                "assignment": _b64(m.assignment),
            }
            for m in v.members
        ],
    }


def describe_offsets_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key, payload) of a ``__consumer_offsets`` record, as text."""
    if key is None:
        return "null", "null"
    try:
        k, v = decode_record(key, value)
    except OffsetsCodecError as exc:
        return f"<undecodable: {exc}>", "" if value is None else f"<{len(value)} bytes>"
    if isinstance(k, GroupKey):
        key_text = _json("type", "legacy" if k.legacy else 2, {"group": k.group_id})
    else:
        data = {"group": k.group_id, "topic": k.topic, "partition": k.partition}
        key_text = _json("type", "legacy" if k.legacy else _version(key), data)
    if value is None or v is None:
        return key_text, DELETE
    version: object = "legacy" if k.legacy else _version(value)
    fields = _group_value(v) if isinstance(v, GroupValue) else _offset_value(v)
    return key_text, _json("version", version, fields)


def describe_txn_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key, payload) of a ``__transaction_state`` record, as text."""
    if key is None:
        return "null", "null"
    try:
        txn_id = decode_key(key)
        meta = None if value is None else decode_value(txn_id, value)
    except TxnLogCodecError as exc:
        return f"<undecodable: {exc}>", "" if value is None else f"<{len(value)} bytes>"
    key_text = _json("type", 0, {"transactionalId": txn_id})
    if value is None or meta is None:
        return key_text, DELETE
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    data = {
        "producerId": meta.producer_id,
        "previousProducerId": meta.last_producer_id,
        "producerEpoch": meta.producer_epoch,
        "lastProducerEpoch": meta.last_producer_epoch,
        "transactionTimeoutMs": meta.txn_timeout_ms,
        "transactionStatus": int(meta.state),
        "transactionPartitions": [
            {"topic": t, "partitionIds": parts} for t, parts in by_topic.items()
        ],
        "transactionLastUpdateTimestampMs": meta.txn_last_update_ms,
        "transactionStartTimestampMs": meta.txn_start_ms,
    }
    return key_text, _json("version", "legacy" if is_legacy_value(value) else _version(value), data)
