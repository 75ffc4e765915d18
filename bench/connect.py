"""Connect benchmark on one ``oncelog connect worker`` process.

1. VerifiableSource, unthrottled (``throughput=-1``, ``batch.size`` records per poll),
   JsonConverter without schemas, idempotent producer, embedded oncelog broker: records
   per second reaching the topic with 1 and with 3 tasks on one worker, measured from
   the topic's end offsets after a warm-up.
2. Exactly-once (KIP-618) against at-least-once, one task each at ``batch.size`` records
   per poll: records/s visible to read_committed readers (last stable offsets) for each
   transaction boundary (``poll``; ``interval`` at 1 s; ``connector``, a VerifiableSource
   whose task commits after each batch), with the transaction-size statistics from
   ``GET /connectors/{c}/tasks/0/metrics``. The two workers run one at a time.
3. PostgresSink: records (JSON with schemas) produced to a topic beforehand, then a
   sink connector inserts them into a private PostgreSQL; rows per second from the
   connector's creation until the table holds them all.

    PYTHONPATH=src .venv/bin/python bench/connect.py --seconds 10 --sink-records 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oncelog.embedded import EmbeddedBroker  # noqa: E402
from tests.integration.connect.conftest import private_postgres  # noqa: E402
from tests.integration.connect.workers import WorkerProcess, wait_for, worker_settings  # noqa: E402


def _stable_total(admin: AdminClient, topic: str, partitions: int) -> int:
    """Sum of the last stable offsets: what a read_committed reader can see (for an
    at-least-once producer, the high watermarks). Counts one commit marker per
    partition and transaction too, under 0.3% with 1,000-record transactions."""
    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    listed = admin.list_offsets(wanted, isolation_level=IsolationLevel.READ_COMMITTED)
    return sum(f.result(15).offset for f in listed.values())


def source_rate(
    broker: EmbeddedBroker,
    worker: WorkerProcess,
    tasks: int,
    seconds: float,
    batch: int,
    label: str = "",
    extra: dict[str, str] | None = None,
) -> tuple[float, dict[str, object]]:
    """Records/s reaching the topic, and the metrics of task 0 at the end."""
    topic = f"verify-{tasks}{label}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    config = {
        "connector.class": "VerifiableSource",
        "topic": topic,
        "throughput": "-1",
        "batch.size": str(batch),
        "tasks.max": str(tasks),
        **(extra or {}),
    }
    name = f"bench-{tasks}{label}"
    status, body = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body
    wait_for(
        lambda: (
            [t["state"] for t in worker.get(f"/connectors/{name}/status")["tasks"]]
            == ["RUNNING"] * tasks
        ),
        60,
        "tasks running",
    )
    time.sleep(2)  # warm-up
    first, start = _stable_total(admin, topic, 3), time.monotonic()
    time.sleep(seconds)
    last, end = _stable_total(admin, topic, 3), time.monotonic()
    metrics = worker.get(f"/connectors/{name}/tasks/0/metrics")["metrics"]
    worker.call("DELETE", f"/connectors/{name}")
    return (last - first) / (end - start), metrics


def sink_rate(broker: EmbeddedBroker, worker: WorkerProcess, pg_base: str, records: int) -> float:
    database = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{pg_base}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    url = f"{pg_base}/{database}"
    topic = "sink-in"
    schema = {
        "type": "struct",
        "fields": [
            {"field": "id", "type": "int64", "optional": False},
            {"field": "name", "type": "string", "optional": True},
            {"field": "amount", "type": "float64", "optional": True},
        ],
        "optional": False,
    }
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(records):
        value = {"schema": schema, "payload": {"id": i, "name": f"name-{i}", "amount": i * 0.5}}
        while True:
            try:
                producer.produce(topic, json.dumps(value).encode())
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)
    config = {
        "connector.class": "PostgresSink",
        "connection.url": url,
        "topics": topic,
        "auto.create": "true",
        "insert.mode": "insert",
        "table.name.format": "bench_sink",
        "value.converter": "JsonConverter",
        "value.converter.schemas.enable": "true",
    }
    start = time.monotonic()
    status, body = worker.call("POST", "/connectors", {"name": "bench-sink", "config": config})
    assert status == 201, body

    def count() -> int:
        with psycopg.connect(url) as conn:
            exists = conn.execute("SELECT to_regclass('bench_sink')").fetchone()
            if exists == (None,):
                return 0
            row = conn.execute("SELECT count(*) FROM bench_sink").fetchone()
            return int(row[0]) if row else 0

    wait_for(lambda: count() >= records, 600, "sink rows")
    elapsed = time.monotonic() - start
    worker.call("DELETE", "/connectors/bench-sink")
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=1000, help="VerifiableSource batch.size")
    parser.add_argument("--sink-records", type=int, default=20000)
    parser.add_argument("--skip-sink", action="store_true", help="no PostgresSink run")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    broker = EmbeddedBroker(base / "data", log_level="WARNING").start()
    worker = WorkerProcess(
        worker_settings(broker.bootstrap, "bench", **{"offset.flush.interval.ms": "1000"}),
        base / "worker.log",
    )
    eos_worker = WorkerProcess(
        worker_settings(
            broker.bootstrap,
            "bench-eos",
            **{"offset.flush.interval.ms": "1000", "exactly.once.source.support": "enabled"},
        ),
        base / "eos-worker.log",
    )
    try:
        worker.start()
        for tasks in (1, 3):
            rate, _ = source_rate(broker, worker, tasks, args.seconds, args.batch)
            print(f"VerifiableSource, {tasks} task(s) on one worker: {rate:,.0f} records/s")
        worker.kill()
        # Exactly-once against at-least-once, one task each, one worker at a time.
        eos_worker.start()
        runs = [
            ("poll", {"transaction.boundary": "poll"}),
            ("interval", {"transaction.boundary": "interval", "transaction.boundary.interval.ms": "1000"}),
            ("connector", {"transaction.boundary": "connector",
                           "connector.class": "tests.integration.connect.eos_connectors.BatchCommitSourceConnector"}),
        ]  # fmt: skip
        results = []
        for boundary, extra in runs:
            rate, metrics = source_rate(
                broker, eos_worker, 1, args.seconds, args.batch, f"-eos-{boundary}", extra
            )
            results.append((boundary, rate, metrics))
        eos_worker.kill()
        worker.start()
        alos, _ = source_rate(broker, worker, 1, args.seconds, args.batch, "-alos")
        print(f"at-least-once, 1 task, batch {args.batch}: {alos:,.0f} records/s")
        for boundary, rate, m in results:
            print(
                f"exactly-once, boundary {boundary}: {rate:,.0f} records/s "
                f"({rate / alos:.2f}x at-least-once); transaction size min "
                f"{m['transaction-size-min']}, max {m['transaction-size-max']}, avg "
                f"{m['transaction-size-avg']:.1f} over {m['transactions-committed']} transactions"
            )
        if not args.skip_sink:
            with private_postgres() as pg_base:
                rate = sink_rate(broker, worker, pg_base, args.sink_records)
                print(f"PostgresSink, 1 task: {rate:,.0f} rows/s ({args.sink_records} rows)")
    finally:
        worker.kill()
        eos_worker.kill()
        broker.stop()


if __name__ == "__main__":
    main()
