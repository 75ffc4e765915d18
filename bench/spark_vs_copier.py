"""The Spark pipeline against a hand-written copier, on the same data in one run.

One input topic is filled once (N x S-byte records in P partitions). Each round then copies
it to a fresh output topic three ways, in a rotating order so drift hits all alike:

* ``copier``: one Python process with confluent-kafka, read_committed consume ->
  transactional produce, the input offsets committed in the transaction
  (send_offsets_to_transaction, KIP-447) every ``--commit-every`` records;
* ``eos``: the Spark query ``oncelog`` source -> ``oncelog`` sink, exactlyOnce=true,
  Trigger.AvailableNow, ``maxOffsetsPerTrigger``, local[2];
* ``alo``: the same query with exactlyOnce=false;
* ``eos-mp2``, ``alo-mp2``: the same with ``maxPartitions=2`` (one task per core);
* ``copier-tuned``: the copier with fetch.wait.max.ms and fetch.queue.backoff.ms at 10 ms
  (``copier-poll``, one ``poll()`` per record, on request with ``--modes``).

records/s counts from the start of the copy (the copier's client creation, the query's
start()) to its end (the last commit, awaitTermination). Then the fixed cost of a
micro-batch: ``--overhead-batches`` batches of 300 records each mode, the median of
Spark's triggerExecution (the first batch excluded). A warm-up query runs first and is not
counted.

    PYTHONPATH=src .venv/bin/python bench/spark_vs_copier.py [--records 300000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.embedded import EmbeddedBroker
from oncelog.spark import spark_session

# eos-mpN / alo-mpN: the pipeline with maxPartitions=N (one task per core on local[N]).
MODES = ("copier", "eos", "alo", "eos-mp2", "alo-mp2", "copier-tuned")


def spark_mode(mode: str) -> tuple[bool, int | None]:
    """(exactly-once, maxPartitions) of a pipeline mode."""
    kind, _, mp = mode.partition("-mp")
    return kind == "eos", int(mp) if mp else None


def cpu_by_role() -> dict[str, float]:
    """CPU seconds (user + system, and system alone) used so far by each role's live processes: this
    process (the copier, Spark's Python driver), the broker, Spark's JVM, Spark's Python
    workers (forked by pyspark.daemon)."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(pid) == os.getpid():
            role = "driver"
        elif "java" in cmd and "spark" in cmd:
            role = "jvm"
        elif "pyspark" in cmd and "daemon" in cmd:
            role = "workers"
        elif "oncelog" in cmd and "broker" in cmd:
            role = "broker"
        else:
            continue
        out[role] = out.get(role, 0.0) + (int(stat[11]) + int(stat[12])) / hz
        out[f"{role} sys"] = out.get(f"{role} sys", 0.0) + int(stat[12]) / hz
    return out


def conf_pair(text: str) -> tuple[str, str]:
    """A ``--conf key=value`` argument; anything else is a usage error."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def create(bootstrap: str, partitions: int, *names: str) -> None:
    with Admin(ClientConfig(bootstrap)) as admin:
        admin.create_topics(names, partitions, exist_ok=False)


def delete(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(list(names)).values():
        f.result(30)


def preload(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    payload = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    p.poll(0)
    assert p.flush(60) == 0


# The tuned copier's consumer settings: librdkafka otherwise pauses a partition whose local
# queue is full for fetch.queue.backoff.ms (1 s) and holds empty fetches for 500 ms.
TUNED = {"fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10}


def copier(
    bootstrap: str,
    src: str,
    dst: str,
    partitions: int,
    commit_every: int,
    tuned: bool,
    per_message: bool = False,
) -> int:
    """Copy src to dst exactly once (same partition), one process; returns records copied.
    ``per_message``: one ``poll()`` per record, as confluent-kafka's examples and most
    hand-written loops do, instead of ``consume(10000)``."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"copier-{dst}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **(TUNED if tuned else {}),
        }
    )
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"copier-{dst}",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    p.init_transactions(30)
    c.assign([TopicPartition(src, i, 0) for i in range(partitions)])
    positions: dict[int, int] = {}
    eof: set[int] = set()
    copied = in_txn = 0
    p.begin_transaction()

    def commit() -> None:
        offsets = [TopicPartition(src, q, o) for q, o in positions.items()]
        p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 30)
        p.commit_transaction(30)

    while len(eof) < partitions:
        if per_message:
            one = c.poll(0.1)
            msgs = [] if one is None else [one]
        else:
            msgs = c.consume(10_000, 0.1)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise RuntimeError(err)
            eof.discard(m.partition())
            while True:
                try:
                    p.produce(dst, m.value(), m.key(), partition=m.partition())
                    break
                except BufferError:
                    p.poll(0.01)
            positions[m.partition()] = m.offset() + 1
            copied += 1
            in_txn += 1
            if in_txn >= commit_every:
                commit()
                p.begin_transaction()
                in_txn = 0
        p.poll(0)
    commit()
    c.close()
    return copied


def query(
    spark: Any,
    bootstrap: str,
    src: str,
    dst: str,
    ckpt: str,
    eos: bool,
    max_offsets: int,
    max_partitions: int | None = None,
):  # type: ignore[no-untyped-def]
    reader = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
    )
    if max_partitions is not None:
        reader = reader.option("maxPartitions", str(max_partitions))
    # as the copier: same key, value, partition
    df = reader.load().selectExpr("key", "value", "partition")
    return (
        df.writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("exactlyOnce", str(eos).lower())
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )


def count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records visible to read_committed in topic (end offsets minus markers is not
    exact, so read them)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-count",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    n, eof = 0, set()
    while len(eof) < partitions:
        for m in c.consume(10_000, 0.5):
            if m.error() is None:
                n += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    c.close()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--max-offsets", type=int, default=100_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--commit-every", type=int, default=20_000, help="copier's transaction size")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--overhead-batches", type=int, default=12)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--check", action="store_true", help="count each output read_committed")
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        type=conf_pair,
        help="a Spark setting for the session, key=value (repeatable)",
    )
    args = ap.parse_args()
    modes = args.modes.split(",")
    known = (*MODES, "copier-poll")
    unknown = [m for m in modes if m not in known]
    if unknown:
        ap.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rates: dict[str, list[float]] = {m: [] for m in modes}
    fixed: dict[str, float] = {}
    n, parts = args.records, args.partitions
    with tempfile.TemporaryDirectory(prefix="oncelog-spark-copier-") as tmp_s:
        tmp = Path(tmp_s)
        with EmbeddedBroker(tmp / "data", log_level="WARNING") as b:
            bs = b.bootstrap
            create(bs, parts, "in")
            preload(bs, "in", n, args.record_size, parts)
            spark = spark_session("oncelog-bench-copier", conf=dict(args.conf))
            # Warm-up, not counted: Python workers and their imports, the JIT, and memory.
            # The first query that moves micro-batches of this size pays for growing the
            # JVM heap and the workers' allocators (fresh pages are dear on a VM); without
            # this, whichever mode runs first is up to twice as slow.
            warm = min(n, 2 * args.max_offsets)
            create(bs, parts, "in-warm", "out-warm")
            preload(bs, "in-warm", warm, args.record_size, parts)
            for eos in (True, False):
                ck = str(tmp / f"ck-warm-{eos}")
                query(
                    spark, bs, "in-warm", "out-warm", ck, eos, args.max_offsets
                ).awaitTermination()
            for r in range(args.rounds):
                order = modes[r % len(modes) :] + modes[: r % len(modes)]
                for mode in order:
                    dst = f"out-{mode}-{r}"
                    create(bs, parts, dst)
                    cpu0 = cpu_by_role()
                    t0 = time.perf_counter()
                    batches: list[int] = []
                    if mode.startswith("copier"):
                        tuned, poll = mode == "copier-tuned", mode == "copier-poll"
                        got = copier(bs, "in", dst, parts, args.commit_every, tuned, poll)
                        assert got == n, got
                    else:
                        eos, max_partitions = spark_mode(mode)
                        q = query(
                            spark,
                            bs,
                            "in",
                            dst,
                            str(tmp / f"ck-{dst}"),
                            eos,
                            args.max_offsets,
                            max_partitions,
                        )
                        q.awaitTermination()
                        if q.exception() is not None:
                            raise RuntimeError(q.exception())
                        batches = [
                            p["durationMs"]["triggerExecution"]
                            for p in q.recentProgress
                            if p["numInputRows"]
                        ]
                    rate = n / (time.perf_counter() - t0)
                    cpu1 = cpu_by_role()
                    # (A worker that exited during the copy drops out: an undercount.)
                    used = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items()}
                    cpu = ", ".join(f"{k} {v:.1f}" for k, v in sorted(used.items()) if v > 0.05)
                    rates[mode].append(rate)
                    if args.check:
                        assert count(bs, dst, parts) == n
                    each = "" if mode.startswith("copier") else f" (batches, ms: {batches})"
                    print(
                        f"round {r} {mode:6} {rate:9.0f} records/s{each}; CPU s: {cpu}", flush=True
                    )
                    delete(bs, dst)
            for mode in (m for m in modes if not m.startswith("copier")):
                if args.overhead_batches < 2:
                    break
                src = f"in-o-{mode}"
                create(bs, parts, src, f"out-o-{mode}")
                preload(bs, src, args.overhead_batches * 300, args.record_size, parts)
                eos, max_partitions = spark_mode(mode)
                q = query(
                    spark,
                    bs,
                    src,
                    f"out-o-{mode}",
                    str(tmp / f"ck-o-{mode}"),
                    eos,
                    300,
                    max_partitions,
                )
                q.awaitTermination()
                ms = [
                    p["durationMs"]["triggerExecution"]
                    for p in q.recentProgress
                    if p["numInputRows"]
                ]
                fixed[mode] = statistics.median(ms[1:])
            spark.stop()
    load = os.getloadavg()
    print(
        f"\n{started}, commit {commit}, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}: "
        f"{n} x {args.record_size} B in {parts} partitions, maxOffsetsPerTrigger "
        f"{args.max_offsets}, copier commits every {args.commit_every}, {args.rounds} round(s)"
    )
    med = {m: statistics.median(v) for m, v in rates.items()}
    print("| mode | records/s (median) | rounds | vs copier |")
    print("|---|---|---|---|")
    for m in modes:
        vs = f"{med[m] / med['copier']:.2f}x" if "copier" in med else "-"
        print(f"| {m} | {med[m]:,.0f} | {', '.join(f'{x:,.0f}' for x in rates[m])} | {vs} |")
    for suffix in ("", "-mp2"):
        if f"eos{suffix}" in med and f"alo{suffix}" in med:
            ratio = med[f"eos{suffix}"] / med[f"alo{suffix}"]
            print(f"exactly-once / at-least-once{suffix}: {ratio:.2f}")
    for m, v in fixed.items():
        print(f"fixed cost per micro-batch ({m}, 300 records, median triggerExecution): {v:.0f} ms")


if __name__ == "__main__":
    main()
