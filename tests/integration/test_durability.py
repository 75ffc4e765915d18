"""Restarts, crashes and torn segments: nothing acknowledged is lost or doubled."""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import build_batch

from .helpers import consume, create_topic, produce


def test_restart_keeps_topics_configs_data_and_producer_continues(
    tmp_path: Path, topic_name: str
) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 3, config={"retention.ms": "123456789"})
        producer = Producer(
            {"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 2}
        )
        errors: list[object] = []
        acked: list[tuple[int, int]] = []

        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err:
                errors.append(err)
            else:
                acked.append((msg.partition(), msg.offset()))

        for i in range(3000):
            producer.produce(topic_name, value=b"a%d" % i, partition=i % 3, on_delivery=cb)
        assert producer.flush(30) == 0
        b.restart()
        for i in range(3000):
            producer.produce(topic_name, value=b"b%d" % i, partition=i % 3, on_delivery=cb)
        assert producer.flush(60) == 0
        assert not errors
        assert len(acked) == 6000 and len(set(acked)) == 6000
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        md = admin.list_topics(timeout=10)
        assert len(md.topics[topic_name].partitions) == 3
        res = ConfigResource("topic", topic_name)
        cfg = admin.describe_configs([res])[res].result(10)
        assert cfg["retention.ms"].value == "123456789"
        msgs = consume(b.bootstrap, topic_name, 3, 6000)
        values = sorted(m.value() for m in msgs)
        assert values == sorted(
            [b"a%d" % i for i in range(3000)] + [b"b%d" % i for i in range(3000)]
        )
    finally:
        b.stop()


@pytest.mark.parametrize(
    "settings", [{}, {"oncelog.flush.on.ack": "true"}], ids=["page-cache", "flush-on-ack"]
)
def test_sigkill_during_idempotent_produce_no_loss_no_duplicates(
    tmp_path: Path, topic_name: str, settings: dict[str, str]
) -> None:
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 3)
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 1,
                "message.timeout.ms": 120000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
            }
        )
        acked: list[bytes] = []
        errors: list[object] = []
        n = 60_000

        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err:
                errors.append(err)
            else:
                acked.append(msg.value())

        def run() -> None:
            for i in range(n):
                while True:
                    try:
                        producer.produce(
                            topic_name, value=b"%d" % i, partition=i % 3, on_delivery=cb
                        )
                        break
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
                if i % 1000 == 0:
                    time.sleep(0.02)  # spread the run over >1 s so the kill lands mid-way
            producer.flush(120)

        t = threading.Thread(target=run)
        t.start()
        while len(acked) < n // 4:
            time.sleep(0.01)
        b.kill()
        killed_at = len(acked)
        time.sleep(0.5)
        b.start()
        t.join(180)
        assert not t.is_alive()
        assert not errors, errors[:3]
        assert killed_at < n
        assert len(acked) == n
        msgs = consume(b.bootstrap, topic_name, 3, n)
        values = [m.value() for m in msgs]
        assert len(values) == len(set(values)) == n, "duplicates or loss after SIGKILL"
        for p in range(3):
            got = [int(m.value()) for m in msgs if m.partition() == p]
            assert got == list(range(p, n, 3))
    finally:
        b.stop()


def test_truncated_segment_drops_only_torn_tail(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        for batch_no in range(10):  # ten separate batches of 100 records
            produce(
                b.bootstrap,
                topic_name,
                [(None, b"%d-%d" % (batch_no, i), 0) for i in range(100)],
                **{"linger.ms": 1000},
            )
        b.stop()
        log_files = sorted((tmp_path / "data" / f"{topic_name}-0").glob("*.log"))
        active = log_files[-1]
        size = active.stat().st_size
        with open(active, "r+b") as f:
            f.truncate(size - 17)  # tear the last batch
        b.start()
        msgs = consume(b.bootstrap, topic_name, 1, 900, timeout=15)
        assert [m.offset() for m in msgs] == list(range(900))
        assert msgs[-1].value() == b"8-99"
        acked = produce(b.bootstrap, topic_name, [(None, b"after", 0)])
        assert acked[0].offset == 900
        assert os.path.getsize(active) < size
    finally:
        b.stop()


def test_sigterm_shuts_down_cleanly_within_five_seconds(tmp_path: Path, topic_name: str) -> None:
    import time as _time

    b = EmbeddedBroker(tmp_path / "data").start()
    create_topic(b.bootstrap, topic_name, 2)
    produce(b.bootstrap, topic_name, [(None, b"x", i % 2) for i in range(1000)])
    started = _time.monotonic()
    assert b.stop(timeout=10) == 0
    assert _time.monotonic() - started < 5
    # a clean shutdown leaves markers that let the next start skip the recovery walk (a
    # broker with fewer than SYNCFS_MIN_LOGS partitions closes each on its own; the batch
    # path with one checkpoint is tests/unit/test_storage_lazy_open.py's)
    assert list((tmp_path / "data" / f"{topic_name}-0").glob("*clean_shutdown*"))
    assert not (tmp_path / "data" / "meta" / "clean-shutdown.json").exists()


def test_durable_acks_leave_only_after_fdatasync(tmp_path: Path, topic_name: str) -> None:
    """oncelog.flush.on.ack: with every fdatasync held back (debug hook), no acks=all produce
    and no transactional request is answered; acks=1 is not held; releasing answers all."""
    hold = tmp_path / "hold-fsync"
    settings = {"oncelog.flush.on.ack": "true", "oncelog.debug.flush.hold.file": str(hold)}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 3)
        hold.touch()
        durable: list[tuple[int, int]] = []
        errors: list[object] = []

        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err:
                errors.append(err)
            else:
                durable.append((msg.partition(), msg.offset()))

        producer = Producer(
            {"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 1}
        )
        for i in range(30):
            producer.produce(topic_name, value=b"%d" % i, partition=i % 3, on_delivery=cb)
        init_done = threading.Event()

        def init() -> None:
            p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "held-txn"})
            try:
                p.init_transactions(30)
                init_done.set()
            except KafkaException:
                pass

        t = threading.Thread(target=init)
        t.start()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            producer.poll(0.1)
        assert durable == [] and not errors
        assert not init_done.is_set()
        # acks=1 promises the write, not the fsync: it is answered while the hook holds.
        plain = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 0})
        plain_offsets: list[int] = []
        plain.produce(
            topic_name,
            value=b"acks1",
            partition=0,
            on_delivery=lambda e, m: plain_offsets.append(m.offset()),
        )
        assert plain.flush(10) == 0
        assert len(plain_offsets) == 1 and durable == []
        hold.unlink()
        assert producer.flush(15) == 0
        t.join(30)
        assert init_done.is_set()
        assert not errors
        assert (
            sorted(o for p, o in durable if p == 0) + plain_offsets
            == sorted(set(range(11)) - set(plain_offsets)) + plain_offsets
        )
        for p in (1, 2):
            assert sorted(o for q, o in durable if q == p) == list(range(10))
    finally:
        hold.unlink(missing_ok=True)
        b.stop()


def test_pipelined_requests_behind_a_held_durable_produce_stay_in_order(
    tmp_path: Path, topic_name: str
) -> None:
    """A held acks=all produce lets the connection dispatch the next requests (their appends
    join the same fdatasync) but no response, not even a later ApiVersions, leaves before it."""
    hold = tmp_path / "hold-fsync"
    settings = {"oncelog.flush.on.ack": "true", "oncelog.debug.flush.hold.file": str(hold)}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)

        def produce_req(i: int) -> pr.ProduceRequest:
            batch = bytes(build_batch([(None, b"r%d" % i, None, int(time.time() * 1000))]))
            part = pr.PartitionProduceData(index=0, records=batch)
            return pr.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=datetime.timedelta(seconds=30),
                topic_data=(pr.TopicProduceData(name=topic_name, partition_data=(part,)),),
            )

        requests = [
            produce_req(0),
            produce_req(1),
            ApiVersionsRequest(client_software_name="p", client_software_version="1"),
            produce_req(2),
        ]
        hold.touch()
        with WireClient(b.bootstrap) as c:
            c.send_raw(b"".join(c.encode(req, cid) for cid, req in enumerate(requests, 1)))
            c.sock.settimeout(1.5)
            with pytest.raises(socket.timeout):
                c.sock.recv(1)  # nothing at all while the fdatasync is held
            # ... yet all three produces were dispatched and appended meanwhile.
            watcher = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "watermarks"})
            assert watcher.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (
                0,
                3,
            )
            watcher.close()
            hold.unlink()
            c.sock.settimeout(15)
            answers = [
                c.decode_response(req.__api_key__, req.__version__, c.recv_frame(), cid)
                for cid, req in enumerate(requests, 1)
            ]
        offsets = [
            a.responses[0].partition_responses[0].base_offset
            for a in (answers[0], answers[1], answers[3])
        ]
        assert offsets == [0, 1, 2]
        assert all(
            a.responses[0].partition_responses[0].error_code == ErrorCode.none
            for a in (answers[0], answers[1], answers[3])
        )
        assert answers[2].error_code == ErrorCode.none
    finally:
        hold.unlink(missing_ok=True)
        b.stop()
