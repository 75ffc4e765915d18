"""A consumer reading data that left the page cache: the broker finds the byte ranges
(index and batch headers) and reads them in off the event loop (fetch's page-read
threads, PageWarmer), counts both in oncelog_fetch_cold_plans_total and
oncelog_fetch_disk_read_bytes_total, and every record arrives intact, with read_committed
still hiding an aborted transaction."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.faults import evict_segment_pages

from .helpers import create_topic, produce
from .metrics_scrape import scrape, value
from .test_transactions import txn_producer


def read_values(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[bytes]]:
    """Every committed value of each partition, up to its end offset."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cold-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    got: dict[int, list[bytes]] = {p: [] for p in ends}
    positions = dict.fromkeys(ends, 0)
    try:
        while any(positions[p] < end for p, end in ends.items()):
            for msg in consumer.consume(500, 1.0):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append(msg.value())
                positions[msg.partition()] = msg.offset() + 1
    finally:
        consumer.close()
    return got


def test_cold_segments_are_served_intact_and_counted(tmp_path: Path, topic_name: str) -> None:
    data = tmp_path / "data"
    b = EmbeddedBroker(data, settings={"metrics.listener": "http://127.0.0.1:0"}).start()
    try:
        assert b.http_url is not None
        create_topic(b.bootstrap, topic_name, 2)
        values = {p: [os.urandom(4000) for _ in range(1500)] for p in range(2)}
        produce(b.bootstrap, topic_name, [(None, v, p) for p in range(2) for v in values[p]])
        # An aborted transaction in the middle of partition 0, then more committed data.
        txn = txn_producer(b.bootstrap, "cold-txn")
        txn.begin_transaction()
        for _ in range(20):
            txn.produce(topic_name, value=b"aborted", partition=0)
        txn.flush()
        txn.abort_transaction(15)
        tail = [os.urandom(4000) for _ in range(500)]
        produce(b.bootstrap, topic_name, [(None, v, 0) for v in tail])
        values[0] += tail

        assert evict_segment_pages(data, topic_name) > 10_000_000
        metrics = scrape(b.http_url)
        before = value(metrics, "oncelog_fetch_disk_read_bytes_total")
        plans_before = value(metrics, "oncelog_fetch_cold_plans_total")
        # Partition 0: 1500 records, 20 aborted, their marker, 500 more.
        got = read_values(b.bootstrap, topic_name, {0: 2021, 1: 1500})
        assert got[0] == values[0]
        assert got[1] == values[1]
        metrics = scrape(b.http_url)
        assert value(metrics, "oncelog_fetch_disk_read_bytes_total") - before > 0
        # The first fetch of each evicted segment found its range in a page-read thread.
        assert value(metrics, "oncelog_fetch_cold_plans_total") - plans_before >= 1
    finally:
        b.stop()
