"""Restarts, crashes and torn segments: nothing acknowledged is lost or doubled."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from oncelog.embedded import EmbeddedBroker

from .helpers import consume, create_topic, produce


def test_restart_keeps_topics_configs_data_and_producer_continues(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 3, config={"retention.ms": "123456789"})
        producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 2})
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
        assert values == sorted([b"a%d" % i for i in range(3000)] + [b"b%d" % i for i in range(3000)])
    finally:
        b.stop()


def test_sigkill_during_idempotent_produce_no_loss_no_duplicates(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
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
                        producer.produce(topic_name, value=b"%d" % i, partition=i % 3, on_delivery=cb)
                        break
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
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
            produce(b.bootstrap, topic_name, [(None, b"%d-%d" % (batch_no, i), 0) for i in range(100)], **{"linger.ms": 1000})
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
    # a clean shutdown leaves markers that let the next start skip the recovery walk
    assert list((tmp_path / "data" / f"{topic_name}-0").glob("*clean_shutdown*"))
