"""Fetch A/B benchmark: two source trees serve the same data, alternately, in one run.

Fills a topic once (1 KB records, idempotent producer), then for each round starts a
broker from each source tree in turn (``--a`` and ``--b``: directories put first on
PYTHONPATH of the broker process) on that same data directory, and reads the whole topic
with a fresh confluent-kafka consumer per isolation level. Prints MB/s and the broker's
CPU seconds per GB (utime+stime from /proc/<pid>/stat) per tree and isolation level:
median and spread over the rounds, since the machine is shared.

    python bench/fetch_ab.py --a /work/main/src --b src --mb 300 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fetch import fill  # noqa: E402
from bench.produce import cpu_seconds  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402

TOPIC = "bench-fetch"


def read_all(bootstrap: str, partitions: int, count: int, isolation: str, part_max: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-fetch-ab",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": part_max,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    start = time.perf_counter()
    seen = 0
    while seen < count:
        for msg in consumer.consume(10000, 5.0):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def start_broker(data_dir: Path, src: str) -> EmbeddedBroker:
    os.environ["PYTHONPATH"] = str(Path(src).resolve())
    return EmbeddedBroker(data_dir).start(timeout=180)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--a", required=True, help="source tree A (e.g. /work/main/src)")
    ap.add_argument("--b", required=True, help="source tree B")
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partition-max-bytes", type=int, default=1 << 20)
    args = ap.parse_args()
    trees = {"A": args.a, "B": args.b}
    levels = ("read_uncommitted", "read_committed")
    cpu: dict[tuple[str, str], list[float]] = {(t, lv): [] for t in trees for lv in levels}
    rate: dict[tuple[str, str], list[float]] = {(t, lv): [] for t in trees for lv in levels}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        broker = start_broker(data, args.b)
        try:
            count = fill(broker.bootstrap, TOPIC, args.mb << 20, args.record_size, args.partitions)
        finally:
            broker.stop()
        mb = count * args.record_size / (1 << 20)
        for _ in range(args.rounds):
            for tree, src in trees.items():
                broker = start_broker(data, src)
                try:
                    assert broker.proc is not None
                    for level in levels:
                        cpu0 = cpu_seconds(broker.proc.pid)
                        elapsed = read_all(
                            broker.bootstrap,
                            args.partitions,
                            count,
                            level,
                            args.partition_max_bytes,
                        )
                        cpu[tree, level].append((cpu_seconds(broker.proc.pid) - cpu0) / (mb / 1024))
                        rate[tree, level].append(mb / elapsed)
                finally:
                    broker.stop()
    print(f"fetch {mb:.0f} MB x {args.rounds} rounds, partition max {args.partition_max_bytes}")
    for tree, src in trees.items():
        for level in levels:
            c, r = cpu[tree, level], rate[tree, level]
            print(
                f"{tree} {src:<28} {level:<17} CPU-s/GB median {statistics.median(c):.2f} "
                f"[{min(c):.2f}..{max(c):.2f}]  MB/s median {statistics.median(r):.0f} "
                f"[{min(r):.0f}..{max(r):.0f}]"
            )


if __name__ == "__main__":
    main()
