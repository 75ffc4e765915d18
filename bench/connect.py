"""Connect benchmark on one ``oncelog connect worker`` process (issue 10).

1. VerifiableSource, unthrottled (``throughput=-1``, ``batch.size`` records per poll),
   JsonConverter without schemas, idempotent producer, embedded oncelog broker: records
   per second reaching the topic with 1 and with 3 tasks on one worker, measured from
   the topic's end offsets after a warm-up.
2. PostgresSink: records (JSON with schemas) produced to a topic beforehand, then a
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
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oncelog.embedded import EmbeddedBroker  # noqa: E402
from tests.integration.connect.conftest import private_postgres  # noqa: E402
from tests.integration.connect.workers import WorkerProcess, wait_for, worker_settings  # noqa: E402


def _end_total(consumer: Consumer, topic: str, partitions: int) -> int:
    return sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    )


def source_rate(
    broker: EmbeddedBroker, worker: WorkerProcess, tasks: int, seconds: float, batch: int
) -> float:
    topic = f"verify-{tasks}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    config = {
        "connector.class": "VerifiableSource",
        "topic": topic,
        "throughput": "-1",
        "batch.size": str(batch),
        "tasks.max": str(tasks),
    }
    name = f"bench-{tasks}"
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
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-watch"})
    try:
        time.sleep(2)  # warm-up
        first, start = _end_total(consumer, topic, 3), time.monotonic()
        time.sleep(seconds)
        last, end = _end_total(consumer, topic, 3), time.monotonic()
    finally:
        consumer.close()
    worker.call("DELETE", f"/connectors/{name}")
    return (last - first) / (end - start)


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
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    broker = EmbeddedBroker(base / "data", log_level="WARNING").start()
    worker = WorkerProcess(
        worker_settings(broker.bootstrap, "bench", **{"offset.flush.interval.ms": "1000"}),
        base / "worker.log",
    )
    try:
        worker.start()
        for tasks in (1, 3):
            rate = source_rate(broker, worker, tasks, args.seconds, args.batch)
            print(f"VerifiableSource, {tasks} task(s) on one worker: {rate:,.0f} records/s")
        with private_postgres() as pg_base:
            rate = sink_rate(broker, worker, pg_base, args.sink_records)
            print(f"PostgresSink, 1 task: {rate:,.0f} rows/s ({args.sink_records} rows)")
    finally:
        worker.kill()
        broker.stop()


if __name__ == "__main__":
    main()
