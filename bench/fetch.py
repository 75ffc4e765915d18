"""Fetch benchmark: confluent-kafka consumes a pre-filled topic from the embedded broker.

Fills a topic once (1 KB records), then reads it whole ``--rounds`` times with a fresh
consumer (assign from the beginning, read_committed), and prints MB/s and the broker's
CPU seconds per GB read. librdkafka negotiates the highest Fetch version the broker
advertises (v16 with topic ids; v12 by name before them), so running this with two
source trees on PYTHONPATH compares their fetch paths.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.produce import cpu_seconds  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402

# See read_all; compare.py's --client-fetch-queue-backoff-ms sets it.
FETCH_QUEUE_BACKOFF_MS = 10


def fill(bootstrap: str, topic: str, total_bytes: int, record_size: int, partitions: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": 1}
    )
    value = b"x" * record_size
    count = total_bytes // record_size
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return count


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    isolation_level: str = "read_committed",
) -> float:
    """Seconds to read ``count`` records of ``topic`` from the start with a fresh consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-fetch",
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            # librdkafka stops fetching a partition for fetch.queue.backoff.ms (1 s by
            # default) whenever its local queue is over queued.min.messages or
            # queued.max.messages.kbytes. A broker that answers faster than the loop below
            # drains the queue trips it now and then: a whole second with nothing fetched,
            # in a read that takes under one (docs/perf-notes/fetch.md, "Consume"). 10 ms
            # keeps the client's flow control and measures the broker, for every broker.
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    start = time.perf_counter()
    seen = 0
    while seen < count:
        # Never ask for more than is left: consume() waits out its timeout for a batch the
        # topic cannot fill, which would add up to 5 s to every run.
        for msg in consumer.consume(min(10000, count - seen), 5.0):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=200, help="megabytes in the topic")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedBroker(Path(tmp) / "data").start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            count = fill(
                broker.bootstrap, "bench-fetch", args.mb << 20, args.record_size, args.partitions
            )
            mb = count * args.record_size / (1 << 20)
            rates, cpu_per_gb = [], []
            for _ in range(args.rounds):
                cpu0 = cpu_seconds(pid)
                elapsed = read_all(broker.bootstrap, "bench-fetch", args.partitions, count)
                rates.append(mb / elapsed)
                cpu_per_gb.append((cpu_seconds(pid) - cpu0) / (mb / 1024))
        finally:
            broker.stop()
    print(
        f"fetch {mb:.0f} MB x {args.rounds}: median {statistics.median(rates):.1f} MB/s "
        f"(min {min(rates):.1f}, max {max(rates):.1f}); broker CPU median "
        f"{statistics.median(cpu_per_gb):.2f} s/GB"
    )


if __name__ == "__main__":
    main()
