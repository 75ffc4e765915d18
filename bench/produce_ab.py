"""A/B produce benchmark: broker CPU-s/GB and MB/s of two source trees in one run.

Starts an embedded broker from each ``--src`` directory in turn (the subprocess gets
``PYTHONPATH=<src>``), and runs idempotent and transactional (100 ms transactions)
produce against it with confluent-kafka: 1 KB records, 3 partitions, acks=all,
linger 5 ms. The trees alternate round by round so drift on a shared machine hits
both alike; the spread over ``--repeat`` rounds is printed with the medians.

Broker CPU is utime+stime of the broker process from /proc/<pid>/stat, over the
produce run only (topic creation and start-up are outside it).

    python bench/produce_ab.py --src /path/to/base/src --src src --mb 300 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce import cpu_seconds  # noqa: E402
from produce_ab_support import started  # noqa: E402

from oncelog.embedded import EmbeddedBroker  # noqa: E402


def produce(
    bootstrap: str,
    topic: str,
    total_bytes: int,
    record_size: int,
    partitions: int,
    txn_ms: int | None,
    pid: int,
) -> tuple[float, float]:
    """(MB/s, broker CPU-s/GB) of one run."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 65_536,
        "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True,
    }
    if txn_ms is not None:
        conf["transactional.id"] = f"ab-{topic}"
    producer = Producer(conf)
    if txn_ms is not None:
        producer.init_transactions(30)
    errors = [0]

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors[0] += 1

    payload = os.urandom(record_size)
    chunk = 500
    batch = [{"value": payload} for _ in range(chunk)]
    n = total_bytes // record_size
    sent = 0
    cpu0 = cpu_seconds(pid)
    start = txn_start = time.perf_counter()
    if txn_ms is not None:
        producer.begin_transaction()
    while sent < n:
        count = min(chunk, n - sent)
        try:
            queued = producer.produce_batch(
                topic, batch[:count], partition=(sent // chunk) % partitions, on_delivery=cb
            )
        except BufferError:
            queued = 0
        sent += queued
        producer.poll(0 if queued == count else 0.0005)
        if txn_ms is not None and (time.perf_counter() - txn_start) * 1000 >= txn_ms:
            producer.commit_transaction(30)
            producer.begin_transaction()
            txn_start = time.perf_counter()
    if txn_ms is not None:
        producer.commit_transaction(30)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu0
    assert errors[0] == 0, f"{errors[0]} delivery errors"
    gb = n * record_size / 1e9
    return n * record_size / elapsed / 1e6, cpu / gb


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", action="append", required=True, help="a source tree (repeatable)")
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--txn-ms", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workloads", default="idem,txn")
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    total = args.mb * 1_000_000
    # (src, workload) -> [(MB/s, CPU-s/GB)]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        for r in range(args.repeat):
            for src in args.src:
                os.environ["PYTHONPATH"] = str(Path(src).resolve())
                with tempfile.TemporaryDirectory(prefix="oncelog-ab-") as tmp:
                    with started(EmbeddedBroker(Path(tmp) / "data", log_level="WARNING")) as b:
                        assert b.proc is not None
                        for w in workloads:
                            txn_ms = args.txn_ms if w == "txn" else None
                            out = produce(
                                b.bootstrap,
                                f"{w}{r}",
                                total,
                                args.record_size,
                                args.partitions,
                                txn_ms,
                                b.proc.pid,
                            )
                            results.setdefault((src, w), []).append(out)
                            print(f"round {r} {src} {w}: {out[0]:.1f} MB/s {out[1]:.2f} CPU-s/GB",
                                  flush=True)  # fmt: skip
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    print(
        f"\n{args.mb} MB x{args.repeat}, {args.record_size} B records, {args.partitions} "
        f"partitions, acks=all, linger 5 ms; median [min-max]"
    )
    for src in args.src:
        for w in workloads:
            runs = results[(src, w)]
            print(
                f"  {src:>30} {w:>5}: MB/s {spread([m for m, _ in runs])}  "
                f"CPU-s/GB {spread([c for _, c in runs])}"
            )
        if "idem" in workloads and "txn" in workloads:
            ratios = [
                t[0] / i[0]
                for i, t in zip(results[(src, "idem")], results[(src, "txn")], strict=True)
            ]
            print(f"  {src:>30} txn/idem MB/s: {spread(ratios)}")


if __name__ == "__main__":
    main()
