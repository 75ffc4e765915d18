"""A data dir written in oncelog's legacy internal-topic layouts starts on a broker that
writes Kafka's layouts: committed offsets (plain and transactional), groups and ongoing and
complete transactions survive, legacy ``__consumer_offsets`` keys are rewritten once, and a
second restart over the mixed log gives the same state."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.client.wire import WireClient
from oncelog.coordinator.placement import partition_for
from oncelog.embedded import EmbeddedBroker
from oncelog.group.offsets_codec import GroupValue, OffsetValue, decode_key, encode_offset_key
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.records.control import build_end_txn_marker
from oncelog.storage.config import LogConfig
from oncelog.storage.unified_log import UnifiedLog
from oncelog.txn.metadata import TransactionMetadata, TxnState

from ..legacy_layouts import (
    legacy_group_key,
    legacy_group_value,
    legacy_offset_key,
    legacy_offset_value,
    legacy_txn_key,
    legacy_txn_value,
)
from .helpers import create_topic, wait_for_log
from .test_internal_topics import read_partition
from .test_transactions import txn_producer

GROUP = "legacy-g"
START_S = 60.0  # generous: these start-ups replay and rewrite, on a shared 2-core machine
DONE, OPEN = "legacy-done", "legacy-open"
DONE_PID, OPEN_PID = 900_000_000, 900_000_001
TXN_PIDS = (900_000_010, 900_000_011)  # producers of the transactional offset commits


def append(data_dir: Path, topic: str, partition: int, batches: list[bytes]) -> None:
    part = UnifiedLog.open(
        data_dir / f"{topic}-{partition}", LogConfig.from_props({}), now_ms=int(time.time() * 1000)
    )
    try:
        for raw in batches:
            batch = bytearray(raw)
            header, now = parse_header(batch), int(time.time() * 1000)
            if header.is_control:
                part.append_control(batch, header, now_ms=now)
            else:
                part.append(batch, header, now_ms=now, coordinator=True)
    finally:
        part.close()


def write_legacy_state(data_dir: Path, topic: str) -> None:
    now = int(time.time() * 1000)

    def offset(partition: int, value: int) -> tuple[bytes, bytes, None, int]:
        v = OffsetValue(value, -1, f"meta-{value}", now, None)
        return (legacy_offset_key(GROUP, topic, partition), legacy_offset_value(v), None, 0)

    group = GroupValue("consumer", 3, None, None, now, ())
    commit_pid, abort_pid = TXN_PIDS
    append(
        data_dir,
        "__consumer_offsets",
        partition_for(GROUP, 50),
        [
            build_batch([offset(0, 5), offset(1, 7)]),
            build_batch([offset(1, 9)]),
            build_batch([(legacy_group_key(GROUP), legacy_group_value(group), None, 0)]),
            # A TxnOffsetCommit that committed, and one that aborted.
            build_batch(
                [offset(0, 11)], producer_id=commit_pid, producer_epoch=0, transactional=True
            ),
            build_batch(
                [offset(1, 99)], producer_id=abort_pid, producer_epoch=0, transactional=True
            ),
            build_end_txn_marker(commit_pid, 0, True, 0, timestamp_ms=now),
            build_end_txn_marker(abort_pid, 0, False, 0, timestamp_ms=now),
        ],
    )
    done = TransactionMetadata(
        DONE, DONE_PID, DONE_PID, 3, 2, 60_000, TxnState.COMPLETE_COMMIT, set(), now, now
    )
    ongoing = TransactionMetadata(
        OPEN, OPEN_PID, -1, 0, -1, 60_000, TxnState.ONGOING, {(topic, 0)}, now, now
    )
    for meta in (done, ongoing):
        raw = (legacy_txn_key(meta.transactional_id), legacy_txn_value(meta), None, 0)
        append(
            data_dir,
            "__transaction_state",
            partition_for(meta.transactional_id, 50),
            [build_batch([raw])],
        )


def describe_txn(
    bootstrap: str, txn_id: str
) -> tuple[str, int, int, int, list[tuple[str, list[int]]]]:
    with WireClient(bootstrap) as c:
        (s,) = c.request(
            DescribeTransactionsRequest(transactional_ids=(txn_id,))
        ).transaction_states
    topics = sorted((t.topic, sorted(t.partitions)) for t in s.topics)
    return (
        s.transaction_state,
        s.producer_id,
        s.producer_epoch,
        int(s.transaction_timeout.total_seconds() * 1000),
        topics,
    )


def committed(bootstrap: str, topic: str) -> list[tuple[int, str | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
        return [(tp.offset, tp.metadata) for tp in tps]
    finally:
        c.close()


def group_state(bootstrap: str) -> ConsumerGroupState:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([GROUP])[GROUP].result(10).state


def dumped(data_dir: Path, topic: str, partition: int, decoder: str) -> list[tuple[Any, Any]]:
    """(key, payload) of every data record, as ``oncelog dump-log <decoder>`` prints them."""
    r = CliRunner().invoke(
        app, ["dump-log", str(data_dir / f"{topic}-{partition}"), decoder, "-o", "json"]
    )
    assert r.exit_code == 0, r.stderr
    out = []
    for dump in json.loads(r.stdout):
        for batch in dump["batches"]:
            for rec in batch.get("records", []):
                if "control_type" not in rec:
                    payload = rec["payload"]
                    out.append(
                        (
                            json.loads(rec["key"]),
                            payload if payload == "<DELETE>" else json.loads(payload),
                        )
                    )
    return out


def test_legacy_data_dir_loads_and_migrates(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start(timeout=START_S)
    try:
        create_topic(b.bootstrap, topic_name, 2)
    finally:
        b.stop()
    write_legacy_state(b.data_dir, topic_name)
    offsets_partition = partition_for(GROUP, 50)
    b.start(timeout=START_S)
    try:
        wait_for_log(b, "rewrote 3 legacy-layout __consumer_offsets keys")
        text = wait_for_log(b, "transactional ids from")  # both load in the background
        assert "rewrote 3 legacy-layout __consumer_offsets keys in Kafka's layout" in text
        assert "rewrote 2 legacy-layout __transaction_state values" in text
        assert "(0 undecodable, skipped)" in text
        assert committed(b.bootstrap, topic_name) == [(11, "meta-11"), (9, "meta-9")]
        assert group_state(b.bootstrap) == ConsumerGroupState.EMPTY
        assert describe_txn(b.bootstrap, DONE) == ("CompleteCommit", DONE_PID, 3, 60_000, [])
        assert describe_txn(b.bootstrap, OPEN) == (
            "Ongoing",
            OPEN_PID,
            0,
            60_000,
            [(topic_name, [0])],
        )
    finally:
        b.stop()
    # The legacy keys now end in tombstones, followed by the state in Kafka's layout.
    records = read_partition(b.data_dir, "__consumer_offsets", offsets_partition)
    last = {k: v for _, k, v in records if k is not None}
    legacy = {k: v for k, v in last.items() if decode_key(k).legacy}
    assert len(legacy) == 3 and all(v is None for v in legacy.values())
    kafka_keys = sorted(repr(decode_key(k)) for k, v in last.items() if not decode_key(k).legacy)
    assert kafka_keys == sorted(
        [
            f"OffsetKey(group_id='{GROUP}', topic='{topic_name}', partition=0, legacy=False)",
            f"OffsetKey(group_id='{GROUP}', topic='{topic_name}', partition=1, legacy=False)",
            f"GroupKey(group_id='{GROUP}', legacy=False)",
        ]
    )
    # dump-log decodes both layouts.
    offsets = dumped(b.data_dir, "__consumer_offsets", offsets_partition, "--offsets-decoder")
    kinds = [(k["type"], p if p == "<DELETE>" else p["version"]) for k, p in offsets]
    # Six legacy records, then per legacy key (in first-seen order): its tombstone and its
    # state in Kafka's layout (OffsetCommitKey v1 / OffsetCommitValue v3, GroupMetadata v3).
    deleted = ("legacy", "<DELETE>")
    assert kinds == [("legacy", "legacy")] * 6 + [
        deleted,
        ("1", "3"),
        deleted,
        ("1", "3"),
        deleted,
        ("2", "3"),
    ]
    assert offsets[0][0]["data"] == {"group": GROUP, "topic": topic_name, "partition": 0}
    assert offsets[0][1]["data"] == {
        "offset": 5,
        "leaderEpoch": -1,
        "metadata": "meta-5",
        "commitTimestamp": offsets[0][1]["data"]["commitTimestamp"],
    }
    # A second start reads the mixed log to the same state and migrates nothing more.
    b.start(timeout=START_S)
    try:
        text = b.log_path.read_text()
        assert text.count("legacy-layout __consumer_offsets keys") == 1
        assert text.count("legacy-layout __transaction_state values") == 1
        assert committed(b.bootstrap, topic_name) == [(11, "meta-11"), (9, "meta-9")]
        assert group_state(b.bootstrap) == ConsumerGroupState.EMPTY
        assert describe_txn(b.bootstrap, OPEN)[0] == "Ongoing"
        # The legacy transactional ids keep fencing and working.
        p = txn_producer(b.bootstrap, DONE)
        assert describe_txn(b.bootstrap, DONE) == ("Empty", DONE_PID, 4, 60_000, [])
        p.begin_transaction()
        p.produce(topic_name, value=b"after", partition=1)
        p.commit_transaction(15)
        q = txn_producer(b.bootstrap, OPEN)
        assert describe_txn(b.bootstrap, OPEN)[:3] == (
            "Empty",
            OPEN_PID,
            2,
        )  # aborted, then re-inited
        del p, q
    finally:
        b.stop()
    assert "Traceback" not in b.log_path.read_text()
    txn_log = dumped(
        b.data_dir, "__transaction_state", partition_for(OPEN, 50), "--transaction-log-decoder"
    )
    mine = [
        (p["version"], p["data"]["transactionStatus"])
        for k, p in txn_log
        if k["data"] == {"transactionalId": OPEN}
    ]
    # Legacy Ongoing (1), its rewrite in Kafka's layout v1 at the first start-up, then
    # PrepareAbort (3), CompleteAbort (5), Empty (0).
    assert mine == [("legacy", 1), ("1", 1), ("1", 3), ("1", 5), ("1", 0)]
    done_log = dumped(
        b.data_dir, "__transaction_state", partition_for(DONE, 50), "--transaction-log-decoder"
    )
    done = [
        (p["version"], p["data"]["transactionStatus"], p["data"]["producerEpoch"])
        for k, p in done_log
        if k["data"] == {"transactionalId": DONE}
    ]
    # Legacy CompleteCommit (4) and its rewrite, then InitProducerId (Empty, epoch 4) and one
    # committed transaction: Ongoing (1), PrepareCommit (2), CompleteCommit (4).
    assert done == [
        ("legacy", 4, 3),
        ("1", 4, 3),
        ("1", 0, 4),
        ("1", 1, 4),
        ("1", 2, 4),
        ("1", 4, 4),
    ]


def test_unknown_and_corrupt_internal_records_are_skipped_and_counted(
    tmp_path: Path, topic_name: str
) -> None:
    """A record type this broker does not know (a share group's, key version 11) from a
    newer broker, and corrupt values in either layout or of a KIP-848 record, are
    skipped and counted at start-up; the rest loads, a valid KIP-848 record included."""
    b = EmbeddedBroker(tmp_path / "data").start(timeout=START_S)
    try:
        create_topic(b.bootstrap, topic_name, 2)
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": GROUP, "enable.auto.commit": False}
        )
        c.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
        c.close()
    finally:
        b.stop()
    share_group_metadata_key = b"\x00\x0b\x00\x01g"  # Kafka's ShareGroupMetadataKey
    consumer_group_metadata_key = b"\x00\x03\x00\x01g"  # Kafka's ConsumerGroupMetadataKey
    epoch_1 = b"\x00\x00\x00\x00\x00\x01\x00"  # value v0: epoch 1, no tagged fields
    append(
        b.data_dir,
        "__consumer_offsets",
        partition_for(GROUP, 50),
        [
            build_batch([(share_group_metadata_key, epoch_1, None, 0)]),
            build_batch([(consumer_group_metadata_key, b"\x00\x00\x00", None, 0)]),
            build_batch([(consumer_group_metadata_key, epoch_1, None, 0)]),
            build_batch([(encode_offset_key(GROUP, topic_name, 1), b"\x00\x03junk", None, 0)]),
            build_batch([(legacy_offset_key(GROUP, topic_name, 1), b"\x00\x01junk", None, 0)]),
        ],
    )
    b.start(timeout=START_S)
    try:
        text = wait_for_log(b, "from 2 records (4 undecodable, skipped)")
        assert "from 2 records (4 undecodable, skipped)" in text
        assert "unknown __consumer_offsets key version 11" in text
        assert "record truncated" in text  # the corrupt consumer group record
        assert "legacy-layout" not in text
        assert committed(b.bootstrap, topic_name) == [(4, None), (-1001, None)]
    finally:
        b.stop()
