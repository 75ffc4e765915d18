"""Log compaction end to end: a real broker's cleaner threads, real clients.

Topics roll small segments; the cleaner backs off 200 ms, so passes follow the
writes closely. A compacted partition is read from offset 0 until the high
watermark, the way a changelog restore reads it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import iter_batches

from .helpers import create_topic

CLEANER = {"log.cleaner.backoff.ms": "200"}
RETENTION_MS = 1000
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(RETENTION_MS),
}

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    b = EmbeddedBroker(tmp_path / "data", settings=CLEANER).start()
    try:
        yield b
    finally:
        b.stop()


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def read_confluent(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted", *, partial_after: float = 0
) -> list[Record]:
    """Every record from offset 0 up to the end (the LSO for read_committed); with
    ``partial_after``, what was read by then if the end keeps moving away."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[Record] = []
    deadline = time.monotonic() + 30
    partial = time.monotonic() + partial_after if partial_after else None
    try:
        while time.monotonic() < deadline:
            if partial is not None and time.monotonic() > partial:
                return out
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF: caught up
                    return out
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()
    raise AssertionError("did not reach the end of the partition")


def read_kafka_python(bootstrap: str, topic: str) -> list[Record]:
    tp = KTopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    out: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while c.position(tp) < end and time.monotonic() < deadline:
            for msgs in c.poll(500).values():
                out.extend((m.offset, m.key, m.value) for m in msgs)
    finally:
        c.close()
    return out


def wait_for(check: Callable[[], object], timeout: float = 45.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.3)


def produce_all(
    producer: Producer, items: list[tuple[bytes, bytes | None]], topic: str
) -> list[int]:
    offsets: list[int] = []
    errors: list[object] = []

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    for key, value in items:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return offsets


def control_batches(partition_dir: Path) -> list[tuple[int, int]]:
    """(offset, producer id) of every control batch in the segment files, oldest first."""
    out = []
    for name in sorted(os.listdir(partition_dir)):
        if name.endswith(".log"):
            try:
                data = (partition_dir / name).read_bytes()
            except FileNotFoundError:  # swapped out meanwhile: read again
                return control_batches(partition_dir)
            for header, _ in iter_batches(data, verify=False):
                if header.is_control:
                    out.append((header.base_offset, header.producer_id))
    return out


# -- 1. compaction end to end ----------------------------------------------------------------


def roll_with_invisible_marker(bootstrap: str, topic: str) -> None:
    """Append one ABORT marker for an unknown producer (KIP-664's WriteTxnMarkers, as
    ``kafka-transactions.sh abort`` does): it rolls the segment once segment.ms passed,
    so everything before becomes cleanable, and no consumer ever sees a control record."""
    with TxnAdmin(ClientConfig(bootstrap)) as admin:
        admin.abort_partition(topic, 0, producer_id=999_999, producer_epoch=0, coordinator_epoch=0)


def test_latest_value_per_key_and_no_tombstones(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 20,
        }
    )
    keys = [f"key-{k:02d}".encode() for k in range(20)]
    items = [(k, f"{k.decode()}=v{v}".encode()) for v in range(300) for k in keys]
    # A reader fetches from offset 0 over and over while the cleaner swaps segments.
    stop = threading.Event()
    background: list[list[Record]] = []

    def reader() -> None:
        while not stop.is_set():
            background.append(read_confluent(broker.bootstrap, topic_name, partial_after=0.5))

    thread = threading.Thread(target=reader)
    thread.start()
    acked: list[int] = []
    try:
        for i in range(0, len(items), 300):  # paced, so cleaning passes overlap the reads
            acked += produce_all(producer, items[i : i + 300], topic_name)
            time.sleep(0.15)
    finally:
        stop.set()
        thread.join()
    assert acked == list(range(6000))
    produce_all(producer, [(k, None) for k in keys[:5]], topic_name)  # tombstones
    time.sleep(1.2)  # segment.ms
    roll_with_invisible_marker(broker.bootstrap, topic_name)
    # key i's last version went to offset 5980 + i.
    expected = [(5980 + i, k, f"{k.decode()}=v299".encode()) for i, k in enumerate(keys) if i >= 5]

    written = {o: (k, v) for o, (k, v) in zip(acked, items, strict=True)}
    written.update({6000 + i: (k, None) for i, k in enumerate(keys[:5])})
    reads = [0]

    def cleaned() -> bool:
        # Read while segments are being swapped: every read is a consistent view.
        got = read_confluent(broker.bootstrap, topic_name)
        reads[0] += 1
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets))
        assert all(written[o] == (k, v) for o, k, v in got)
        assert {r for r in expected} <= set(got)  # nothing kept is ever missing
        return got == expected

    wait_for(cleaned)  # one pass removes the old versions, a later one the tombstones
    assert len(background) >= 3
    for got in background:
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets))
        assert all(written[o] == (k, v) for o, k, v in got)
    assert high_watermark(broker.bootstrap, topic_name) == 6006
    # The same log through kafka-python's fetcher.
    assert read_kafka_python(broker.bootstrap, topic_name) == expected
    # The cleaned log survives a restart as it is.
    broker.restart()
    assert read_confluent(broker.bootstrap, topic_name) == expected
    assert read_kafka_python(broker.bootstrap, topic_name) == expected


# -- 2. compaction and transactions ---------------------------------------------------------------


def test_transactions_on_a_compacted_topic(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED)
    keys = [f"k{i}".encode() for i in range(10)]
    a = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": f"{topic_name}-a",
            "linger.ms": 1,
        }
    )
    b = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": f"{topic_name}-b",
            "linger.ms": 1,
        }
    )
    a.init_transactions(10)
    b.init_transactions(10)
    aborted_values: set[bytes] = set()
    for r in range(10):
        # Interleaved: both transactions are open at once; A commits on even rounds, B on odd.
        a.begin_transaction()
        b.begin_transaction()
        for k in keys:
            a.produce(topic_name, key=k, value=f"A{r}".encode(), partition=0)
            b.produce(topic_name, key=k, value=f"B{r}".encode(), partition=0)
        a.flush(10)
        b.flush(10)  # aborted records must reach the log before the abort
        for producer, name, commit in ((a, "A", r % 2 == 0), (b, "B", r % 2 == 1)):
            if commit:
                producer.commit_transaction(10)
            else:
                aborted_values.add(f"{name}{r}".encode())
                producer.abort_transaction(10)
    # Before cleaning, read_uncommitted sees aborted data.
    before = read_confluent(broker.bootstrap, topic_name)
    assert {v for _, _, v in before} & aborted_values
    time.sleep(1.2)  # roll: one last committed transaction lands in a fresh active segment
    a.begin_transaction()
    a.produce(topic_name, key=b"end", value=b"x", partition=0)
    a.commit_transaction(10)
    # Committed latest: round 9's B (B wrote after A in every round, and A aborted round 9).
    expected = {**{k: b"B9" for k in keys}, b"end": b"x"}
    partition_dir = broker.data_dir / f"{topic_name}-0"

    def settled() -> bool:
        uncommitted = read_confluent(broker.bootstrap, topic_name)
        # The B9 commit marker (its data remains) and the last A commit (active segment) stay.
        return (
            {k: v for _, k, v in uncommitted} == expected
            and len(uncommitted) == 11
            and len(control_batches(partition_dir)) == 2
        )

    wait_for(settled)
    uncommitted = read_confluent(broker.bootstrap, topic_name)
    committed = read_confluent(broker.bootstrap, topic_name, "read_committed")
    assert committed == uncommitted
    assert not {v for _, _, v in uncommitted} & aborted_values
    assert {k: v for _, k, v in committed} == expected
    markers = control_batches(partition_dir)
    b9_last = max(o for o, k, v in committed if v == b"B9")
    assert markers[0][0] > b9_last and markers[1][0] > committed[-1][0]
    # Both transactional producers still work after their old batches are gone.
    for producer in (a, b):
        producer.begin_transaction()
        producer.produce(topic_name, key=b"after", value=b"ok", partition=0)
        producer.commit_transaction(10)
    assert read_confluent(broker.bootstrap, topic_name, "read_committed")[-1][1:] == (
        b"after",
        b"ok",
    )


# -- 3. idempotent producer after compaction ----------------------------------------------------------


def test_idempotent_producer_continues_after_compaction(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 20,
        }
    )
    keys = [f"k{i}".encode() for i in range(5)]
    produce_all(producer, [(k, f"{v}".encode()) for v in range(200) for k in keys], topic_name)
    time.sleep(1.2)
    produce_all(producer, [(b"roll", b"r")], topic_name)
    wait_for(lambda: len(read_confluent(broker.bootstrap, topic_name)) == 6)
    # Same producer instance, same producer id and sequence: no error, offsets continue.
    offsets = produce_all(producer, [(k, b"next") for k in keys], topic_name)
    assert offsets == list(range(1001, 1006))
    # And after a crash and recovery of the broker, still no sequence error.
    broker.kill()
    broker.start()
    offsets = produce_all(producer, [(k, b"final") for k in keys], topic_name)
    assert offsets == list(range(1006, 1011))
    got = read_confluent(broker.bootstrap, topic_name)
    assert {k: v for _, k, v in got} == {**{k: b"final" for k in keys}, b"roll": b"r"}


# -- 4. SIGKILL during a segment swap -----------------------------------------------------------------


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(15)


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_sigkill_during_segment_swap(tmp_path: Path, topic_name: str, stage: str) -> None:
    settings = {**CLEANER, f"oncelog.debug.cleaner.{stage}.delay.ms": "60000"}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1, {**COMPACTED, "cleanup.policy": "delete"})
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 20,
            }
        )
        keys = [f"k{i}".encode() for i in range(7)]
        produce_all(
            producer,
            [(k, f"{k.decode()}-{v}".encode()) for v in range(150) for k in keys],
            topic_name,
        )
        time.sleep(1.2)
        produce_all(producer, [(b"roll", b"r")], topic_name)
        written = read_confluent(b.bootstrap, topic_name)
        assert len(written) == 1051
        _alter(b.bootstrap, topic_name, {"cleanup.policy": "compact"})  # the cleaner starts now
        d = b.data_dir / f"{topic_name}-0"
        suffix = ".log.cleaned" if stage == "cleaned" else ".log.swap"
        found = wait_for(lambda: [n for n in os.listdir(d) if n.endswith(suffix)])
        assert isinstance(found, list) and len(found) == 1
        swap_base = int(found[0].split(".")[0])
        swap_end = None
        if stage == "swap":
            swap_end = int((d / f"{swap_base:020d}.range.swap").read_text().split()[1])
        active_base = max(int(n.split(".")[0]) for n in os.listdir(d) if n.endswith(".log"))
        assert b.proc is not None
        workers = children(b.proc.pid)
        assert workers  # the pass runs in a child process
        b.kill()
        # The orphaned worker notices at once (EOF on its pipe) and exits.
        wait_for(lambda: not [pid for pid in workers if Path(f"/proc/{pid}").exists()], 10)
        b.settings = {**CLEANER, "log.cleaner.enable": "false"}
        b.start()
        after = read_confluent(b.bootstrap, topic_name)
        if stage == "cleaned":
            assert after == written  # the commit point was not reached: fully old
        else:
            assert swap_end is not None
            latest = {k: o for o, k, _ in written if o < active_base}
            expected = [
                r for r in written if not (swap_base <= r[0] < swap_end) or latest[r[1]] == r[0]
            ]
            assert after == expected  # that group fully cleaned, the rest untouched
            assert len(after) < len(written)
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
        # Nothing kept is lost: every key's latest value is there.
        assert {k: v for _, k, v in after} == {k: v for _, k, v in written}
        # Cleaning resumes and finishes after the crash.
        b.stop()
        b.settings = dict(CLEANER)
        b.start()
        wait_for(lambda: len(read_confluent(b.bootstrap, topic_name)) == 8)
    finally:
        b.stop()
