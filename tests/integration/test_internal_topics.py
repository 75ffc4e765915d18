"""Internal topics: closed to client writes with Kafka's answers, stable partition counts,
undecodable records skipped at start-up, tombstones, loading from a compacted log."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v2 import request as oc
from kio.schema.write_txn_markers.v1 import request as wm

from oncelog.client.wire import WireClient
from oncelog.coordinator.placement import partition_for
from oncelog.embedded import EmbeddedBroker
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.replay import iter_log
from oncelog.storage.unified_log import UnifiedLog

from .helpers import create_topic, wait_for_log
from .test_transactions import read_all, txn_producer

INTERNAL = ("__transaction_state", "__consumer_offsets")
READ_COMMITTED = "read_committed"


def produce_plain(bootstrap: str, topic: str, partition: int) -> KafkaError | None:
    """One record from a plain (non-idempotent) confluent-kafka producer; its delivery error."""
    outcome: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10_000})
    p.produce(
        topic,
        key=b"\x00\x07bad",
        value=b"\xff" * 20,
        partition=partition,
        on_delivery=lambda err, _msg: outcome.append(err),
    )
    assert p.flush(15) == 0
    return outcome[0]


def read_partition(
    data_dir: Path, topic: str, partition: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record in a partition, read from its files."""
    part = UnifiedLog.open(
        data_dir / f"{topic}-{partition}", LogConfig.from_props({}), now_ms=int(time.time() * 1000)
    )
    try:
        return [(e.offset, e.key, e.value) for e in iter_log(part) if e.marker_commit is None]
    finally:
        part.close()


def test_client_produce_to_internal_topics_is_invalid_topic_and_restart_is_fine(
    tmp_path: Path, topic_name: str
) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        for topic in INTERNAL:
            err = produce_plain(b.bootstrap, topic, 0)
            assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION, err
        b.stop()
        b.start()
        # Both coordinators work after the restart.
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "after-refused-writes")
        p.begin_transaction()
        p.produce(topic_name, value=b"ok", partition=0)
        p.commit_transaction(15)
        assert [m.value() for m in read_all(b.bootstrap, topic_name, 1, READ_COMMITTED)] == [b"ok"]
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "g-after", "enable.auto.commit": False}
        )
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        assert c.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 1
        c.close()
    finally:
        b.stop()
    assert "Traceback" not in b.log_path.read_text()
    # Nothing a client sent reached the internal topics' logs.
    for topic in INTERNAL:
        assert all(key != b"\x00\x07bad" for _, key, _ in read_partition(b.data_dir, topic, 0))


def test_admin_operations_on_internal_topics_get_kafka_codes(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for topic in INTERNAL:
        tp = TopicPartition(topic, 0, -1)
        with pytest.raises(KafkaException) as deleted:
            admin.delete_records([tp])[tp].result(10)
        assert deleted.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(KafkaException) as dropped:
            admin.delete_topics([topic], operation_timeout=5)[topic].result(10)
        assert dropped.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(KafkaException) as grown:
            admin.create_partitions([NewPartitions(topic, 60)])[topic].result(10)
        assert grown.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert len(admin.list_topics(timeout=10).topics["__consumer_offsets"].partitions) == 50
    # Kafka lets an operator tune an internal topic's configs (no internal-topic rule in its
    # AlterConfigs path), and so do we.
    res = ConfigResource(
        "topic",
        "__consumer_offsets",
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    described = admin.describe_configs([ConfigResource("topic", "__consumer_offsets")])
    (cfg,) = described.values()
    assert cfg.result(10)["retention.ms"].value == "86400000"


def test_foreign_txn_markers_on_internal_topics_are_refused(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)

    def marker(pid: int, topic: str) -> wm.WritableTxnMarker:
        return wm.WritableTxnMarker(
            producer_id=pid,
            producer_epoch=0,
            transaction_result=True,
            coordinator_epoch=0,
            topics=(wm.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
        )

    with WireClient(broker.bootstrap) as c:
        resp = c.request(
            wm.WriteTxnMarkersRequest(
                markers=(
                    marker(424242, "__transaction_state"),
                    marker(424242, "__consumer_offsets"),
                    marker(-1, topic_name),
                )
            )
        )
    codes = [m.topics[0].partitions[0].error_code for m in resp.markers]
    assert codes == [
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_record,
    ]


def plant_undecodable(data_dir: Path, topic: str, partition: int) -> int:
    """Append a valid batch whose key and value are garbage; returns its offset."""
    part = UnifiedLog.open(
        data_dir / f"{topic}-{partition}", LogConfig.from_props({}), now_ms=int(time.time() * 1000)
    )
    try:
        batch = bytearray(build_batch([(b"\x00\x7fgarbage-key", b"\xde\xad\xbe\xef" * 8, None, 0)]))
        return part.append(
            batch, parse_header(batch), now_ms=int(time.time() * 1000), coordinator=True
        ).base_offset
    finally:
        part.close()


def test_undecodable_internal_records_are_skipped_at_start(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "survivor")
        p.begin_transaction()
        p.produce(topic_name, value=b"v", partition=0)
        p.commit_transaction(15)
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "survivors", "enable.auto.commit": False}
        )
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        c.close()
    finally:
        b.stop()
    txn_partition = partition_for("survivor", 50)
    offsets_partition = partition_for("survivors", 50)
    bad_txn = plant_undecodable(b.data_dir, "__transaction_state", txn_partition)
    bad_offsets = plant_undecodable(b.data_dir, "__consumer_offsets", offsets_partition)
    b.start()
    try:
        # Both internal topics load in the background after the ready line.
        # (generous timeouts: under a loaded make test the background load took over 15 s once)
        wait_for_log(b, "skipping undecodable record in __consumer_offsets-", timeout=60)
        text = wait_for_log(b, "transactional ids from", timeout=60)
        assert "transactional ids from" in text, "the transaction log did not finish loading"
        assert (
            f"skipping undecodable record in __transaction_state-{txn_partition} at offset {bad_txn}"
            in text
        )
        assert (
            f"skipping undecodable record in __consumer_offsets-{offsets_partition} at offset {bad_offsets}"
            in text
        )
        assert "(1 undecodable, skipped)" in text
        # The state around the bad records was loaded: the old producer is fenced by a new
        # one, and the group's committed offset is still there.
        p2 = txn_producer(b.bootstrap, "survivor")
        p2.begin_transaction()
        p2.produce(topic_name, value=b"w", partition=0)
        p2.commit_transaction(15)
        p.begin_transaction()
        p.produce(topic_name, value=b"zombie", partition=0)
        with pytest.raises(KafkaException):
            p.commit_transaction(10)
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "survivors", "enable.auto.commit": False}
        )
        assert c.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 1
        c.close()
        assert [m.value() for m in read_all(b.bootstrap, topic_name, 1, READ_COMMITTED)] == [
            b"v",
            b"w",
        ]
    finally:
        b.stop()


def _fenced(p: Producer, topic: str) -> bool:
    """Does the broker refuse this (older) producer instance's next transaction?"""
    try:
        p.begin_transaction()
        p.produce(topic, value=b"zombie", partition=0)
        p.commit_transaction(10)
    except KafkaException:
        return True
    return False


def test_partition_counts_come_from_the_existing_topics(tmp_path: Path, topic_name: str) -> None:
    """Restarts with a different transaction.state.log.num.partitions and
    offsets.topic.num.partitions neither unfence older producers nor lose offsets."""
    ids = [f"fence-{i}" for i in range(20)]
    groups = [f"group-{i}" for i in range(20)]
    assert len({partition_for(t, 5) for t in ids}) == 5  # several partitions in play
    counts = [5, 7, 3]
    settings = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        older = {t: txn_producer(b.bootstrap, t) for t in ids}
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False}
        )
        c.close()
        for i, g in enumerate(groups):
            gc = Consumer(
                {"bootstrap.servers": b.bootstrap, "group.id": g, "enable.auto.commit": False}
            )
            gc.commit(offsets=[TopicPartition(topic_name, 0, 100 + i)], asynchronous=False)
            gc.close()
        for n in counts[1:]:
            b.stop()
            b.settings.update(
                {
                    "transaction.state.log.num.partitions": str(n),
                    "offsets.topic.num.partitions": str(n),
                }
            )
            b.start()
            text = b.log_path.read_text()
            assert (
                f"internal topic __transaction_state has 5 partitions; the configured {n} is ignored"
                in text
            )
            assert (
                f"internal topic __consumer_offsets has 5 partitions; the configured {n} is ignored"
                in text
            )
            newer = {t: txn_producer(b.bootstrap, t) for t in ids}
            fenced = [t for t in ids if _fenced(older[t], topic_name)]
            assert fenced == ids
            older = newer
            for i, g in enumerate(groups):
                gc = Consumer(
                    {"bootstrap.servers": b.bootstrap, "group.id": g, "enable.auto.commit": False}
                )
                assert gc.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 100 + i
                gc.close()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        md = admin.list_topics(timeout=10)
        assert len(md.topics["__transaction_state"].partitions) == 5
        assert len(md.topics["__consumer_offsets"].partitions) == 5
        # No zombie's record is visible: nothing committed at all.
        assert read_all(b.bootstrap, topic_name, 1, READ_COMMITTED) == []
    finally:
        b.stop()


def test_coordinators_write_tombstones_for_expired_ids_and_deleted_groups(
    tmp_path: Path, topic_name: str
) -> None:
    settings = {
        "transactional.id.expiration.ms": "1000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "short-lived")
        p.begin_transaction()
        p.produce(topic_name, value=b"v", partition=0)
        p.commit_transaction(15)
        del p
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "doomed", "enable.auto.commit": False}
        )
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        c.close()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_consumer_groups(["doomed"])["doomed"].result(10)
        time.sleep(2.5)  # the id expires after 1 s of inactivity; checked every 200 ms
    finally:
        b.stop()

    def latest(topic: str, partition: int) -> dict[bytes, bytes | None]:
        out: dict[bytes, bytes | None] = {}
        for _, key, value in read_partition(b.data_dir, topic, partition):
            assert key is not None
            out[key] = value
        return out

    txn_log = latest("__transaction_state", partition_for("short-lived", 50))
    assert len(txn_log) == 1 and list(txn_log.values()) == [None]  # the id's tombstone
    offsets_log = latest("__consumer_offsets", partition_for("doomed", 50))
    # A simple group (commits, no membership) has one offset key and no group record.
    assert len(offsets_log) == 1 and list(offsets_log.values()) == [None]


def test_start_up_loads_a_log_holding_only_the_latest_record_per_key(
    tmp_path: Path, topic_name: str
) -> None:
    """What the cleaner leaves: earlier records of each key removed."""
    b = EmbeddedBroker(
        tmp_path / "data",
        settings={
            "transaction.state.log.num.partitions": "1",
            "offsets.topic.num.partitions": "1",
        },
    ).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        producers = {}
        for t in ("compact-a", "compact-b"):
            producers[t] = txn_producer(b.bootstrap, t)
            for i in range(3):
                producers[t].begin_transaction()
                producers[t].produce(topic_name, value=f"{t}-{i}".encode(), partition=0)
                producers[t].commit_transaction(15)
        for i in range(5):
            c = Consumer(
                {
                    "bootstrap.servers": b.bootstrap,
                    "group.id": "compacted",
                    "enable.auto.commit": False,
                }
            )
            c.commit(offsets=[TopicPartition(topic_name, 0, 10 + i)], asynchronous=False)
            c.close()
    finally:
        b.stop()
    for topic in INTERNAL:
        records = read_partition(b.data_dir, topic, 0)
        keep: dict[bytes | None, tuple[bytes | None, bytes | None]] = {}
        for _, key, value in records:
            keep.pop(key, None)
            keep[key] = (key, value)  # latest per key, in the order of its last write
        assert len(keep) < len(records)
        directory = b.data_dir / f"{topic}-0"
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()
        part = UnifiedLog.open(directory, LogConfig.from_props({}), now_ms=int(time.time() * 1000))
        for key, value in keep.values():
            batch = bytearray(build_batch([(key, value, None, int(time.time() * 1000))]))
            part.append(
                batch, parse_header(batch), now_ms=int(time.time() * 1000), coordinator=True
            )
        part.close()
    b.start()
    try:
        for t, old in producers.items():
            txn_producer(b.bootstrap, t)
            assert _fenced(old, topic_name)  # epochs survived compaction
        c = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "compacted", "enable.auto.commit": False}
        )
        assert c.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 14
        c.close()
    finally:
        b.stop()


def test_expired_offsets_are_tombstoned(tmp_path: Path, topic_name: str) -> None:
    """Offset retention (an OffsetCommit v2 retention time; offsets.retention.minutes takes the
    same path at its minute scale): the coordinator tombstones the expired offset."""
    b = EmbeddedBroker(
        tmp_path / "data", settings={"offsets.retention.check.interval.ms": "200"}
    ).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        commit = oc.OffsetCommitRequest(
            group_id="short-retention",
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time=datetime.timedelta(milliseconds=500),
            topics=(
                oc.OffsetCommitRequestTopic(
                    name=topic_name,
                    partitions=(
                        oc.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=42, committed_metadata=None
                        ),
                    ),
                ),
            ),
        )
        with WireClient(b.bootstrap) as c:
            assert c.request(commit).topics[0].partitions[0].error_code == ErrorCode.none
        c2 = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "short-retention",
                "enable.auto.commit": False,
            }
        )
        assert c2.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 42
        time.sleep(1.5)
        assert (
            c2.committed([TopicPartition(topic_name, 0)], 10)[0].offset == -1001
        )  # OFFSET_INVALID: none
        c2.close()
    finally:
        b.stop()
    records = read_partition(b.data_dir, "__consumer_offsets", partition_for("short-retention", 50))
    assert [value is None for _, _, value in records] == [False, True]  # the commit, its tombstone
