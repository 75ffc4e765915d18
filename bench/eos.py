"""The "EOS performance" workload: a consume-transform-produce loop.

Each instance consumes its group-assigned input partitions and writes to the
output topic; in exactly-once mode it commits input offsets inside the
transaction (send_offsets_to_transaction, KIP-447), in at-least-once mode it
commits them with a plain OffsetCommit after flushing. Runs 1 and 3 instances
of both modes in the same run, exactly-once also with the KIP-848 consumer group
protocol (group.protocol=consumer), and reports records/s and commit latency.

Transaction version 1 against 2 (KIP-890 part 2): no installed client negotiates TV2, so
both run with oncelog.testing.raw_txn's producer (the same client code, TV1 or TV2 on the
wire; the consumer stays librdkafka), alternating TV1 and TV2 runs (A/B, --ab-rounds).

    python bench/eos.py [--records 200000] [--record-size 1024] [--transaction-duration-ms 100]
    python bench/eos.py --worker --bootstrap-server ... --input-topic ... (one instance)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.raw_txn import GroupMetadata, RawTransactionalProducer

RAW_BATCH = 500  # records the raw producer buffers per partition before one Produce


class LibrdkafkaSink:
    """Output through confluent-kafka's producer (TV1): transactional in eos mode,
    idempotent with a plain OffsetCommit in alo mode."""

    def __init__(self, args: argparse.Namespace, consumer: Consumer) -> None:
        self.args, self.consumer = args, consumer
        self.eos = args.mode == "eos"
        conf: dict[str, object] = {
            "bootstrap.servers": args.bootstrap_server,
            "linger.ms": 5,
            "enable.idempotence": True,
        }
        if self.eos:
            conf["transactional.id"] = args.transactional_id
        self.producer = Producer(conf)
        if self.eos:
            self.producer.init_transactions(30)
        self.epochs: list[tuple[int, int]] = []

    def begin(self) -> None:
        if self.eos:
            self.producer.begin_transaction()

    def write(self, partition: int, value: bytes | None) -> None:
        self.producer.produce(self.args.output_topic, value=value, partition=partition)

    def idle(self) -> None:
        self.producer.poll(0)

    def commit(self, positions: dict[int, int]) -> None:
        offsets = [TopicPartition(self.args.input_topic, p, o) for p, o in positions.items()]
        if self.eos:
            self.producer.send_offsets_to_transaction(
                offsets, self.consumer.consumer_group_metadata(), 30
            )
            self.producer.commit_transaction(30)
        else:
            self.producer.flush(30)
            self.consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        pass


class RawSink:
    """Output through oncelog.testing.raw_txn's producer on transaction version
    ``--txn-version``: records buffered per partition and sent RAW_BATCH at a time (and at
    commit), offsets with the consumer's group metadata (KIP-447)."""

    def __init__(self, args: argparse.Namespace, consumer: Consumer) -> None:
        self.args, self.consumer = args, consumer
        self.producer = RawTransactionalProducer(
            args.bootstrap_server, args.transactional_id, transaction_version=args.txn_version
        )
        self.producer.init_transactions()
        self.epochs = self.producer.history
        self.pending: dict[int, list[tuple[bytes | None, bytes | None]]] = {}

    def begin(self) -> None:
        self.producer.begin_transaction()

    def write(self, partition: int, value: bytes | None) -> None:
        batch = self.pending.setdefault(partition, [])
        batch.append((None, value))
        if len(batch) >= RAW_BATCH:
            self.producer.send(self.args.output_topic, partition, batch)
            self.pending[partition] = []

    def idle(self) -> None:
        pass

    def commit(self, positions: dict[int, int]) -> None:
        for partition, records in self.pending.items():
            if records:
                self.producer.send(self.args.output_topic, partition, records)
        self.pending.clear()
        group = GroupMetadata.from_librdkafka(self.consumer.consumer_group_metadata())
        offsets = {(self.args.input_topic, p): o for p, o in positions.items()}
        self.producer.send_offsets_to_transaction(offsets, group)
        self.producer.commit_transaction()

    def close(self) -> None:
        self.producer.close()


def worker(args: argparse.Namespace) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": args.consumer_group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "group.protocol": args.group_protocol,
        }
    )
    sink = RawSink(args, consumer) if args.txn_version else LibrdkafkaSink(args, consumer)
    consumer.subscribe([args.input_topic])
    commits: list[float] = []
    copied = 0
    idle_since = time.monotonic()
    last_commit = 0.0
    in_txn = False
    positions: dict[int, int] = {}
    txn_start = time.monotonic()

    def commit() -> None:
        nonlocal in_txn, positions, last_commit
        t0 = time.perf_counter()
        sink.commit(positions)
        commits.append((time.perf_counter() - t0) * 1000)
        last_commit = time.time()
        in_txn, positions = False, {}

    while time.monotonic() - idle_since < args.idle_exit_s:
        msgs = consumer.consume(1000, args.poll_timeout)
        for m in msgs:
            if m.error():
                continue
            if not in_txn:
                sink.begin()
                in_txn, txn_start = True, time.monotonic()
            sink.write(m.partition(), m.value())
            positions[m.partition()] = m.offset() + 1
            copied += 1
        if msgs:
            idle_since = time.monotonic()
        sink.idle()
        if in_txn and (time.monotonic() - txn_start) * 1000 >= args.transaction_duration_ms:
            commit()
    if in_txn:
        commit()
    consumer.close()
    sink.close()
    result = {"copied": copied, "commits": commits, "last_commit": last_commit}
    print(json.dumps({**result, "epochs": sink.epochs}))


def run(
    bootstrap: str,
    mode: str,
    instances: int,
    records: int,
    record_size: int,
    txn_ms: int,
    tag: str,
    group_protocol: str = "classic",
    txn_version: int = 0,
) -> dict[str, float]:
    """txn_version 0: librdkafka's producer; 1 or 2: the raw producer on that version."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t in (f"in-{tag}", f"out-{tag}"):
        admin.create_topics([NewTopic(t, 6, 1)])[t].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    payload = os.urandom(record_size)
    for i in range(records):
        while True:
            try:
                producer.produce(f"in-{tag}", payload, partition=i % 6)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)
    start = time.time()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--mode",
                mode,
                "--bootstrap-server",
                bootstrap,
                "--input-topic",
                f"in-{tag}",
                "--output-topic",
                f"out-{tag}",
                "--consumer-group-id",
                f"g-{tag}",
                "--transactional-id",
                f"eos-{tag}-{i}",
                "--transaction-duration-ms",
                str(txn_ms),
                "--group-protocol",
                group_protocol,
                "--txn-version",
                str(txn_version),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(instances)
    ]
    stats = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    copied = sum(s["copied"] for s in stats)
    end = max(s["last_commit"] for s in stats)
    latencies = sorted(x for s in stats for x in s["commits"])
    if txn_version == 2:  # TV2 really ran: one epoch bump per commit, in every instance
        for s in stats:
            epochs = [e for _, e in s["epochs"]]
            assert epochs == list(range(epochs[0], epochs[0] + len(s["commits"]) + 1)), epochs
    return {
        "copied": copied,
        "rec_s": copied / (end - start),
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--mode", choices=["eos", "alo"], default="eos")
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--input-topic")
    ap.add_argument("--output-topic")
    ap.add_argument("--consumer-group-id")
    ap.add_argument("--transactional-id", default="eos-bench")
    ap.add_argument("--poll-timeout", type=float, default=0.1)
    ap.add_argument("--transaction-duration-ms", type=int, default=100)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--idle-exit-s", type=float, default=3.0)
    ap.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    ap.add_argument(
        "--txn-version", type=int, choices=[0, 1, 2], default=0, help="0: librdkafka (TV1)"
    )
    ap.add_argument("--ab-rounds", type=int, default=2, help="TV1/TV2 alternations")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    results = {}
    tv_runs: dict[tuple[int, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="oncelog-eos-") as tmp:
        with EmbeddedBroker(
            Path(tmp) / "data",
            # Both protocols start assigning at once: no initial delay, 500 ms heartbeats.
            settings={
                "group.initial.rebalance.delay.ms": "0",
                "group.consumer.heartbeat.interval.ms": "500",
            },
            log_level="WARNING",
        ) as b:
            bootstrap = args.bootstrap_server or b.bootstrap
            for instances in (1, 3):
                for mode, protocol in (("alo", "classic"), ("eos", "classic"), ("eos", "consumer")):
                    results[(mode, instances, protocol)] = run(
                        bootstrap,
                        mode,
                        instances,
                        args.records,
                        args.record_size,
                        args.transaction_duration_ms,
                        f"{mode}{instances}{protocol}",
                        protocol,
                    )
            # TV1 against TV2, same client and workload, alternating (1 2, 2 1, ...) so
            # drift in the machine's load does not favour one of them.
            for instances in (1, 3):
                for rnd in range(args.ab_rounds):
                    for tv in (1, 2) if rnd % 2 == 0 else (2, 1):
                        tv_runs.setdefault((instances, tv), []).append(
                            run(
                                bootstrap,
                                "eos",
                                instances,
                                args.records,
                                args.record_size,
                                args.transaction_duration_ms,
                                f"tv{tv}-{instances}-{rnd}",
                                txn_version=tv,
                            )
                        )
    print(
        f"consume-transform-produce, {args.records} x {args.record_size} B records, 6 partitions, commit every {args.transaction_duration_ms} ms"
    )
    print("  mode            group protocol  instances   records/s   commit p50 ms   commit p99 ms")
    for (mode, instances, protocol), r in results.items():
        name = "exactly-once" if mode == "eos" else "at-least-once"
        print(
            f"  {name:15} {protocol:15} {instances:9d} {r['rec_s']:11.0f}"
            f" {r['p50']:15.2f} {r['p99']:15.2f}"
        )
    for instances in (1, 3):
        eos = results[("eos", instances, "classic")]["rec_s"]
        ratio = eos / results[("alo", instances, "classic")]["rec_s"]
        print(f"  exactly-once / at-least-once with {instances} instance(s): {ratio:.3f}")
        kip848 = results[("eos", instances, "consumer")]["rec_s"] / eos
        print(f"  exactly-once, consumer / classic protocol, {instances} instance(s): {kip848:.3f}")

    print(
        f"transaction version 1 against 2, raw producer, classic group, {args.ab_rounds}"
        " alternating rounds (median)"
    )
    print("  version  instances   records/s   commit p50 ms   commit p99 ms")
    medians: dict[tuple[int, int], float] = {}
    for (instances, tv), runs in sorted(tv_runs.items()):
        medians[(instances, tv)] = statistics.median(r["rec_s"] for r in runs)
        print(
            f"  TV{tv}      {instances:9d} {medians[(instances, tv)]:11.0f}"
            f" {statistics.median(r['p50'] for r in runs):15.2f}"
            f" {statistics.median(r['p99'] for r in runs):15.2f}"
        )
    for instances in (1, 3):
        ratio = medians[(instances, 2)] / medians[(instances, 1)]
        print(f"  TV2 / TV1 records/s with {instances} instance(s): {ratio:.3f}")


if __name__ == "__main__":
    main()
