"""The compacted internal topics stay bounded however long one
transactional id or one group lives, and a restart stays fast."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .wire_loops import (
    add_partition,
    commit_offsets,
    init_producer_id,
    run_transactions,
    topic_bytes,
)

SEGMENT = 65536
BOUND = 500_000
# Short cleaner backoff; segments the cleaner replaced are unlinked after 500 ms instead of
# Kafka's 60 s (log.segment.delete.delay.ms), so the test sees the disk shrink.
CLEANER = {"log.cleaner.backoff.ms": "200", "log.segment.delete.delay.ms": "500"}


def wait_below(data_dir: Path, topic: str, limit: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    size = topic_bytes(data_dir, topic)
    while size >= limit and time.monotonic() < deadline:
        time.sleep(0.2)
        size = topic_bytes(data_dir, topic)
    return size


def timed_start(broker: EmbeddedBroker) -> float:
    """Seconds from process start to the broker's ready line."""
    t0 = time.monotonic()
    broker.start(timeout=60)
    return time.monotonic() - t0


def test_transaction_state_stays_bounded_and_restarts_fast(tmp_path: Path, topic_name: str) -> None:
    settings = {"transaction.state.log.segment.bytes": str(SEGMENT), **CLEANER}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        with WireClient(b.bootstrap) as c:
            pid, epoch = run_transactions(c, "bounded", topic_name, 10_000)
        # Uncleaned, 10,000 transactions take about 4 MB (3 records each).
        # Cleaned: at most the active segment plus the cleaned remainder.
        size = wait_below(b.data_dir, "__transaction_state", 2 * SEGMENT, timeout=30)
        assert size < 2 * SEGMENT, f"__transaction_state is {size} bytes"
    finally:
        b.stop()
    assert topic_bytes(b.data_dir, "__transaction_state") < BOUND // 4

    assert timed_start(b) < 5.0
    try:
        with WireClient(b.bootstrap) as c:
            bumped = init_producer_id(c, "bounded")
            assert bumped.error_code == ErrorCode.none
            assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
            # The epoch of the 10,000 transactions is fenced ...
            assert add_partition(c, "bounded", pid, epoch, topic_name) == ErrorCode.producer_fenced
            # ... and the new one commits.
            assert add_partition(c, "bounded", pid, epoch + 1, topic_name) == ErrorCode.none
            ended = c.request(
                et.EndTxnRequest(
                    transactional_id="bounded",
                    producer_id=pid,
                    producer_epoch=epoch + 1,
                    committed=True,
                )
            )
            assert ended.error_code == ErrorCode.none
    finally:
        b.stop()


def test_consumer_offsets_stay_bounded_and_keep_the_latest_commit(
    tmp_path: Path, topic_name: str
) -> None:
    settings = {"offsets.topic.segment.bytes": str(SEGMENT), **CLEANER}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        with WireClient(b.bootstrap) as c:
            commit_offsets(c, "bounded-group", topic_name, range(1, 20_001))
        size = wait_below(b.data_dir, "__consumer_offsets", 2 * SEGMENT, timeout=30)
        assert size < 2 * SEGMENT, f"__consumer_offsets is {size} bytes"
    finally:
        b.stop()

    assert timed_start(b) < 5.0
    try:
        c2 = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "bounded-group",
                "enable.auto.commit": False,
            }
        )
        assert c2.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 20_000
        c2.close()
    finally:
        b.stop()
