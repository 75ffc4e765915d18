"""Spark pipeline benchmark (local[2]): records/s through a read -> transform ->
write query on the oncelog source and sink, 1 KB records.

1. Throughput: N records preloaded, Trigger.AvailableNow, a sweep of
   maxOffsetsPerTrigger, exactlyOnce=true against exactlyOnce=false in one run.
2. Latency: a producer writes at a steady rate while the query runs with the
   default trigger; a read_committed consumer measures produce -> visible in output
   (p50/p99), both sink modes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.embedded import EmbeddedBroker
from oncelog.spark import spark_session

PARTITIONS = 3


def topics(bootstrap: str, *names: str) -> None:
    with Admin(ClientConfig(bootstrap)) as admin:
        admin.create_topics(names, PARTITIONS, exist_ok=False)


def preload(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    payload = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)


def query(
    spark,
    bootstrap: str,
    src: str,
    dst: str,
    ckpt: str,
    exactly_once: bool,
    max_offsets: int | None,
):  # type: ignore[no-untyped-def]
    reader = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    df = reader.load().selectExpr(
        "key", "value", "partition"
    )  # transform: keep the input partition
    return (
        df.writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("exactlyOnce", str(exactly_once).lower())
        .option("checkpointLocation", ckpt)
    )


def throughput(
    spark,
    bootstrap: str,
    tmp: Path,
    n: int,
    size: int,
    exactly_once: bool,
    max_offsets: int,
    tag: str,
) -> float:  # type: ignore[no-untyped-def]
    src, dst = f"in-{tag}", f"out-{tag}"
    topics(bootstrap, src, dst)
    preload(bootstrap, src, n, size)
    start = time.perf_counter()
    q = (
        query(spark, bootstrap, src, dst, str(tmp / f"ck-{tag}"), exactly_once, max_offsets)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return n / (time.perf_counter() - start)


def overhead(
    spark,
    bootstrap: str,
    tmp: Path,
    batches: int,
    per_batch: int,
    size: int,
    exactly_once: bool,
    tag: str,
) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Fixed cost of a micro-batch: `batches` small batches (per_batch records each) under
    Trigger.AvailableNow; (median, mean) of the batches' triggerExecution in ms."""
    src, dst = f"in-{tag}", f"out-{tag}"
    topics(bootstrap, src, dst)
    preload(bootstrap, src, batches * per_batch, size)
    q = (
        query(spark, bootstrap, src, dst, str(tmp / f"ck-{tag}"), exactly_once, per_batch)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    ms = [p["durationMs"]["triggerExecution"] for p in q.recentProgress if p["numInputRows"]]
    ms = ms[1:]  # the first batch pays for worker start-up
    return statistics.median(ms), statistics.mean(ms)


def latency(
    spark,
    bootstrap: str,
    tmp: Path,
    size: int,
    exactly_once: bool,
    rate: int,
    seconds: float,
    tag: str,
) -> list[float]:  # type: ignore[no-untyped-def]
    src, dst = f"lin-{tag}", f"lout-{tag}"
    topics(bootstrap, src, dst)
    q = query(spark, bootstrap, src, dst, str(tmp / f"lck-{tag}"), exactly_once, None).start()
    time.sleep(8)  # let the first (empty) batches run
    seen: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"lat-{tag}",
                "isolation.level": "read_committed",
            }
        )
        c.assign([TopicPartition(dst, p, 0) for p in range(PARTITIONS)])
        while not stop.is_set():
            for m in c.consume(1000, 0.1):
                if not m.error():
                    sent = int.from_bytes(m.value()[:8], "big") / 1e6  # type: ignore[index]
                    seen.append(time.time() - sent)
        c.close()

    t = threading.Thread(target=consume)
    t.start()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True})
    pad = os.urandom(size - 8)
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        p.produce(src, int(time.time() * 1e6).to_bytes(8, "big") + pad, partition=i % PARTITIONS)
        i += 1
        p.poll(0)
        time.sleep(1 / rate)
    p.flush(30)
    time.sleep(8)
    stop.set()
    t.join()
    q.stop()
    return [x * 1000 for x in seen]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--sweep", default="5000,20000,60000", help="maxOffsetsPerTrigger values")
    ap.add_argument("--rate", type=int, default=500, help="records/s for the latency phase")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument(
        "--overhead-only",
        action="store_true",
        help="only the fixed per-batch cost (ONCELOG_SPARK_POOL_MAX_IDLE=0 disables client reuse)",
    )
    ap.add_argument("--overhead-batches", type=int, default=20)
    args = ap.parse_args()
    sweep = [int(x) for x in args.sweep.split(",")]
    with tempfile.TemporaryDirectory(prefix="oncelog-spark-bench-") as tmp_s:
        tmp = Path(tmp_s)
        with EmbeddedBroker(tmp / "data", log_level="WARNING") as b:
            spark = spark_session("oncelog-bench")
            throughput(
                spark, b.bootstrap, tmp, 5000, args.record_size, True, 5000, "warmup"
            )  # JVM/JIT warm-up, discarded
            fixed = {
                eo: overhead(
                    spark,
                    b.bootstrap,
                    tmp,
                    args.overhead_batches,
                    300,
                    args.record_size,
                    eo,
                    f"o{int(eo)}",
                )
                for eo in (False, True)
            }
            pool = os.environ.get("ONCELOG_SPARK_POOL_MAX_IDLE", "8")
            print(
                f"per-batch overhead ({args.overhead_batches} batches of 300 x {args.record_size} B, client pool max idle {pool}):"
            )
            for eo in (False, True):
                print(
                    f"  exactlyOnce={str(eo).lower():5}  median {fixed[eo][0]:6.0f} ms  mean {fixed[eo][1]:6.0f} ms"
                )
            if args.overhead_only:
                spark.stop()
                return
            rows = []
            for mo in sweep:
                for eo in (False, True):  # alternate modes so drift hits both alike
                    rows.append(
                        (
                            mo,
                            eo,
                            throughput(
                                spark,
                                b.bootstrap,
                                tmp,
                                args.records,
                                args.record_size,
                                eo,
                                mo,
                                f"{mo}-{int(eo)}",
                            ),
                        )
                    )
            lat = {
                eo: latency(
                    spark,
                    b.bootstrap,
                    tmp,
                    args.record_size,
                    eo,
                    args.rate,
                    args.seconds,
                    f"l{int(eo)}",
                )
                for eo in (False, True)
            }
            spark.stop()
    print(
        f"spark local[2], {args.records} x {args.record_size} B records, {PARTITIONS} partitions, read -> transform -> write"
    )
    print("  maxOffsetsPerTrigger   exactlyOnce=false   exactlyOnce=true   ratio")
    for mo in sweep:
        alo = next(r for m, e, r in rows if m == mo and not e)
        eos = next(r for m, e, r in rows if m == mo and e)
        print(f"  {mo:20d} {alo:17.0f}/s {eos:16.0f}/s   {eos / alo:.3f}")
    print(f"end-to-end latency at {args.rate} records/s (produce -> visible to read_committed), ms")
    for eo in (False, True):
        values = lat[eo]
        print(
            f"  exactlyOnce={str(eo).lower():5}  p50 {pct(values, 0.5):8.0f}  p99 {pct(values, 0.99):8.0f}  (n={len(values)}, mean {statistics.mean(values) if values else 0:.0f})"
        )


if __name__ == "__main__":
    main()
