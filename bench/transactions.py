"""Transaction benchmarks.

1. Throughput: transactional produce (100 ms transactions) against idempotent
   produce, 1 KB records, 3 partitions, acks=all, in the same run. Kafka
   publishes a ~3% cost at this setting.
2. Latency: EndTxn round trip (commit after flush) and commit -> next send
   (begin, produce one record, flush), p50/p99, with blocking begin
   on and off (broker setting oncelog.txn.blocking.begin).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def throughput(
    bootstrap: str,
    topic: str,
    total_bytes: int,
    record_size: int,
    partitions: int,
    txn_ms: int | None,
) -> float:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 65_536,  # a bounded backlog: memory growth would distort the comparison
        "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True,
    }
    if txn_ms is not None:
        conf["transactional.id"] = f"bench-{topic}"
    producer = Producer(conf)
    if txn_ms is not None:
        producer.init_transactions(30)
        producer.begin_transaction()
    errors = [0]

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors[0] += 1

    payload = os.urandom(record_size)
    chunk = 500
    batch = [{"value": payload} for _ in range(chunk)]
    n = total_bytes // record_size
    sent = 0
    start = txn_start = time.perf_counter()
    while sent < n:
        count = min(chunk, n - sent)
        try:
            queued = producer.produce_batch(
                topic, batch[:count], partition=(sent // chunk) % partitions, on_delivery=cb
            )
        except BufferError:
            queued = 0
        sent += queued
        producer.poll(
            0 if queued == count else 0.0005
        )  # short back-off: a long one would throttle the non-transactional run
        if txn_ms is not None and (time.perf_counter() - txn_start) * 1000 >= txn_ms:
            producer.commit_transaction(30)
            producer.begin_transaction()
            txn_start = time.perf_counter()
    if txn_ms is not None:
        producer.commit_transaction(30)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    assert errors[0] == 0, f"{errors[0]} delivery errors"
    return n * record_size / elapsed / 1e6


def latencies(
    bootstrap: str,
    topic: str,
    rounds: int,
    transactional_id: str | None = None,
    *,
    interval_s: float = 0.0,
    start_at: float | None = None,
) -> tuple[list[float], list[float]]:
    """commit_transaction and next-send latencies over ``rounds`` transactions, back to
    back, or (``interval_s``) one commit every ``interval_s`` from ``start_at`` (a
    ``time.perf_counter()`` value; default: once the producer is ready)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id or f"lat-{topic}",
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    commit_ms, next_send_ms = [], []
    producer.begin_transaction()
    producer.produce(topic, b"x" * 100, partition=0)
    producer.flush()
    due = time.perf_counter() if start_at is None else start_at
    for _ in range(rounds):
        if interval_s:
            if (wait := due - time.perf_counter()) > 0:
                time.sleep(wait)
            due += interval_s
        t0 = time.perf_counter()
        producer.commit_transaction(30)
        t1 = time.perf_counter()
        producer.begin_transaction()
        producer.produce(topic, b"x" * 100, partition=0)
        producer.flush(30)
        t2 = time.perf_counter()
        commit_ms.append((t1 - t0) * 1000)
        next_send_ms.append((t2 - t1) * 1000)
    producer.commit_transaction(30)
    return commit_ms, next_send_ms


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--txn-ms", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=300, help="commit latency samples per setting")
    ap.add_argument("--repeat", type=int, default=2, help="alternate idempotent/transactional runs")
    args = ap.parse_args()
    total = args.mb * 1_000_000
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-") as tmp:
        with EmbeddedBroker(Path(tmp) / "a", log_level="WARNING") as b:
            idem, txn = [], []
            for r in range(args.repeat):  # alternate so drift hits both alike
                create(b.bootstrap, f"idem{r}", args.partitions)
                idem.append(
                    throughput(
                        b.bootstrap, f"idem{r}", total, args.record_size, args.partitions, None
                    )
                )
                create(b.bootstrap, f"txn{r}", args.partitions)
                txn.append(
                    throughput(
                        b.bootstrap,
                        f"txn{r}",
                        total,
                        args.record_size,
                        args.partitions,
                        args.txn_ms,
                    )
                )
            create(b.bootstrap, "lat", 1)
            on = latencies(b.bootstrap, "lat", args.rounds)
        with EmbeddedBroker(
            Path(tmp) / "b", settings={"oncelog.txn.blocking.begin": "false"}, log_level="WARNING"
        ) as b:
            create(b.bootstrap, "lat", 1)
            off = latencies(b.bootstrap, "lat", args.rounds)
    mi, mt = statistics.median(idem), statistics.median(txn)
    print(
        f"throughput, {args.mb} MB x{args.repeat}, {args.record_size} B records, {args.partitions} partitions, acks=all"
    )
    print(
        f"  idempotent:                {mi:7.1f} MB/s  (runs: {', '.join(f'{x:.1f}' for x in idem)})"
    )
    print(
        f"  transactional ({args.txn_ms} ms txns): {mt:7.1f} MB/s  (runs: {', '.join(f'{x:.1f}' for x in txn)})"
    )
    print(
        f"  transactional / idempotent: {mt / mi:.3f}  (cost {100 * (1 - mt / mi):.1f}%; Kafka publishes ~3%)"
    )
    print(f"latency over {args.rounds} transactions (ms)       p50     p99")
    for name, (commit, nxt) in (("blocking begin on ", on), ("blocking begin off", off)):
        print(f"  {name}  EndTxn round trip   {pct(commit, 0.5):7.2f} {pct(commit, 0.99):7.2f}")
        print(f"  {name}  commit -> next send {pct(nxt, 0.5):7.2f} {pct(nxt, 0.99):7.2f}")


if __name__ == "__main__":
    main()
