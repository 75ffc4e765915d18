"""PostgresSource -> topic -> PostgresSink on a worker process against a real broker and
a real PostgreSQL, with the worker restarted in the middle: rows inserted while it
was down arrive after the restart, each exactly once in the topic (a graceful stop
commits the source offsets) and in the target table."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import consume_all
from .workers import WorkerProcess, wait_for, worker_settings

# xdist (make test): one worker runs the PostgreSQL tests, so the session's private server
# starts once.
pytestmark = pytest.mark.xdist_group("postgres")


def _sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0


def _table_exists(url: str, table: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,)


def _insert(url: str, first: int, last: int) -> None:
    _sql(
        url,
        "INSERT INTO src SELECT g, g * 1.5, '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 minute',"
        f" 'tag' || g FROM generate_series({first}, {last}) g",
    )


def test_postgres_source_to_sink_through_a_worker_restart(
    broker: EmbeddedBroker, pg_url: str, tmp_path: Path
) -> None:
    _sql(
        pg_url,
        "CREATE TABLE src (id BIGINT PRIMARY KEY, amount NUMERIC(12,3), at TIMESTAMPTZ, tag TEXT)",
    )
    _insert(pg_url, 1, 100)
    settings = worker_settings(broker.bootstrap, "pg")
    converters = {
        "key.converter": "JsonConverter",
        "value.converter": "JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }
    source = {
        "connector.class": "PostgresSource",
        "connection.url": pg_url,
        "table.include.list": "src",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": "pg-",
        "poll.interval.ms": "100",
        **converters,
    }
    sink = {
        "connector.class": "PostgresSink",
        "connection.url": pg_url,
        "topics": "pg-src",
        "auto.create": "true",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "table.name.format": "dst",
        **converters,
    }
    worker = WorkerProcess(settings, tmp_path / "first.log").start()
    try:
        assert worker.call("POST", "/connectors", {"name": "pg-source", "config": source})[0] == 201
        assert worker.call("POST", "/connectors", {"name": "pg-sink", "config": sink})[0] == 201
        wait_for(
            lambda: _table_exists(pg_url, "dst") and _count(pg_url, "dst") == 100, 60, "100 rows"
        )
        assert worker.terminate() == 0
    finally:
        worker.kill()

    _insert(pg_url, 101, 250)
    worker = WorkerProcess(settings, tmp_path / "second.log").start()
    try:
        wait_for(lambda: _count(pg_url, "dst") == 250, 60, "250 rows after the restart")
        with psycopg.connect(pg_url) as conn:
            diff = conn.execute(
                "(SELECT id, amount, at, tag FROM src EXCEPT SELECT id, amount, at, tag FROM dst)"
                " UNION ALL (SELECT id, amount, at, tag FROM dst EXCEPT SELECT id, amount, at, tag FROM src)"
            ).fetchall()
        assert diff == []
        ids = [
            json.loads(m.value())["payload"]["id"]
            for m in consume_all(broker.bootstrap, "pg-src", 250)
        ]
        assert sorted(ids) == list(range(1, 251))  # none missing, none duplicated
        assert worker.get("/connectors/pg-source/offsets") == {
            "offsets": [
                {
                    "partition": {"protocol": "1", "table": "public.src"},
                    "offset": {"incrementing": 250},
                }
            ]
        }
    finally:
        worker.kill()
