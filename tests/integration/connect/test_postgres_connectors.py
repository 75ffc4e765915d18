"""PostgresSource and PostgresSink against a real PostgreSQL server, at the task level
(poll / put), without a worker."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import psycopg
import pytest

from oncelog.connect.api import partition_key
from oncelog.connect.api.converters import JsonConverter
from oncelog.connect.api.data import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaType,
    Struct,
    struct_schema,
)
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.records import SinkRecord, SourceRecord
from oncelog.connect.connectors.postgres_sink import PostgresSinkConnector, PostgresSinkTask
from oncelog.connect.connectors.postgres_source import (
    PostgresSourceConnector,
    PostgresSourceTask,
    group_round_robin,
)
from oncelog.connect.runtime.task_context import BasicSinkTaskContext, BasicSourceTaskContext
from oncelog.connect.storage.offsets import MemoryOffsetStore

# xdist (make test): one worker runs the PostgreSQL tests, so the session's private server
# starts once.
pytestmark = pytest.mark.xdist_group("postgres")


def _sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _source(url: str, store: MemoryOffsetStore, **config: str) -> PostgresSourceTask:
    full = {"connection.url": url, "topic.prefix": "pg-", "poll.interval.ms": "20", **config}
    task = PostgresSourceTask()
    task.initialize(BasicSourceTaskContext(full, store))
    task.start(full)
    return task


def _drain(task: PostgresSourceTask, polls: int = 3) -> list[SourceRecord]:
    """Poll until ``polls`` consecutive empty polls."""
    out: list[SourceRecord] = []
    empty = 0
    while empty < polls:
        batch = task.poll()
        if batch:
            out.extend(batch)
            empty = 0
        else:
            empty += 1
    return out


def _commit(store: MemoryOffsetStore, records: list[SourceRecord]) -> None:
    store.commit({partition_key(r.source_partition or {}): r.source_offset for r in records})


def test_incrementing_mode_types_batches_and_resume(pg_url: str) -> None:
    _sql(
        pg_url,
        "CREATE TABLE accounts (id SERIAL PRIMARY KEY, name TEXT NOT NULL, balance NUMERIC(10,2), active BOOLEAN,"
        " created TIMESTAMP NOT NULL, small SMALLINT, big BIGINT, ratio DOUBLE PRECISION, payload JSONB)",
        "INSERT INTO accounts (name, balance, active, created, small, big, ratio, payload) VALUES"
        " ('ann', 12.50, true, '2024-01-02 03:04:05.678', 1, 10000000000, 0.5, '{\"a\": 1}'),"
        " ('bo', NULL, NULL, '2024-01-03 00:00:00', NULL, NULL, NULL, NULL),"
        " ('cy', 1.00, false, '2024-01-04 00:00:00', 3, 3, 3, '[]')",
    )
    store = MemoryOffsetStore()
    task = _source(pg_url, store, **{"table.include.list": "accounts", "mode": "incrementing",
                                     "incrementing.column.name": "id", "batch.max.rows": "2"})  # fmt: skip
    first = task.poll() or []
    assert len(first) == 2  # batch.max.rows
    record = first[0]
    assert record.topic == "pg-accounts"
    assert record.source_partition == {"protocol": "1", "table": "public.accounts"}
    assert [r.source_offset for r in first] == [{"incrementing": 1}, {"incrementing": 2}]
    schema = record.value_schema
    assert schema is not None and schema.name == "accounts"
    types = {f.name: (f.schema.type, f.schema.optional, f.schema.name) for f in schema.fields}
    assert types == {
        "id": (SchemaType.INT32, False, None),
        "name": (SchemaType.STRING, False, None),
        "balance": (SchemaType.BYTES, True, "org.apache.kafka.connect.data.Decimal"),
        "active": (SchemaType.BOOLEAN, True, None),
        "created": (SchemaType.INT64, False, "org.apache.kafka.connect.data.Timestamp"),
        "small": (SchemaType.INT16, True, None),
        "big": (SchemaType.INT64, True, None),
        "ratio": (SchemaType.FLOAT64, True, None),
        "payload": (SchemaType.STRING, True, None),
    }
    value = record.value
    assert value.get("balance") == decimal.Decimal("12.50")
    assert value.get("created") == dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
    assert value.get("payload") == '{"a": 1}'
    assert first[1].value.get("balance") is None
    # The records survive the JSON converter with schemas, as the worker will send them.
    converter = JsonConverter()
    converter.configure({}, False)
    back = converter.to_connect_data(
        "pg-accounts", converter.from_connect_data("pg-accounts", schema, value)
    )
    assert back.value.get("balance") == decimal.Decimal("12.50")
    assert back.value.get("created") == dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)

    rest = _drain(task)
    assert [r.value.get("name") for r in rest] == ["cy"]
    _commit(store, first)  # a crash before the third row's offset was committed
    task.stop()

    _sql(pg_url, "INSERT INTO accounts (name, created) VALUES ('dee', now())")
    resumed = _source(pg_url, store, **{"table.include.list": "accounts", "mode": "incrementing",
                                        "incrementing.column.name": "id"})  # fmt: skip
    assert [r.value.get("name") for r in _drain(resumed)] == ["cy", "dee"]
    resumed.stop()


def test_timestamp_incrementing_mode_sees_updates_and_ties(pg_url: str) -> None:
    _sql(
        pg_url,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, state TEXT, updated TIMESTAMPTZ NOT NULL)",
        "INSERT INTO shop.orders VALUES (1, 'new', '2024-01-01T00:00:00Z'), (2, 'new', '2024-01-01T00:00:00Z'),"
        " (3, 'new', '2024-01-01T00:00:01Z')",
    )
    store = MemoryOffsetStore()
    config = {"table.include.list": "shop.orders", "mode": "timestamp+incrementing",
              "incrementing.column.name": "id", "timestamp.column.name": "updated", "batch.max.rows": "1"}  # fmt: skip
    task = _source(pg_url, store, **config)
    first = task.poll() or []
    assert [(r.value.get("id"), r.source_offset) for r in first] == [
        (1, {"incrementing": 1, "timestamp": 1704067200000, "timestamp_nanos": 0})
    ]
    _commit(store, first)
    task.stop()
    # Resuming between two rows with the same timestamp loses neither.
    task = _source(pg_url, store, **config)
    seen = _drain(task)
    assert [r.value.get("id") for r in seen] == [2, 3]
    _commit(store, seen)
    _sql(
        pg_url,
        "UPDATE shop.orders SET state = 'paid', updated = '2024-02-01T00:00:00.123456Z' WHERE id = 1",
    )
    updated = _drain(task)
    assert [(r.value.get("id"), r.value.get("state")) for r in updated] == [(1, "paid")]
    assert updated[0].source_offset == {
        "incrementing": 1,
        "timestamp": 1706745600123,
        "timestamp_nanos": 123456000,
    }
    assert updated[0].topic == "pg-orders"
    task.stop()


def test_timestamp_mode_waits_for_the_delay(pg_url: str) -> None:
    _sql(
        pg_url,
        "CREATE TABLE events (id INT, at TIMESTAMP NOT NULL)",
        "INSERT INTO events VALUES (1, now() - interval '1 hour'), (2, now() + interval '1 hour')",
    )
    store = MemoryOffsetStore()
    task = _source(pg_url, store, **{"table.include.list": "events", "mode": "timestamp",
                                     "timestamp.column.name": "at", "timestamp.delay.interval.ms": "60000"})  # fmt: skip
    # Row 2 lies in the future and row 1 is older than the delay: only row 1 is read.
    assert [r.value.get("id") for r in _drain(task)] == [1]
    task.stop()


def test_source_connector_validation_and_task_split() -> None:
    connector = PostgresSourceConnector()
    errors = {k: v.errors for k, v in connector.validate({"connection.url": "mysql://x", "table.include.list": "a",
                                                          "mode": "timestamp", "topic.prefix": "p"}).items() if v.errors}  # fmt: skip
    assert errors == {
        "connection.url": [
            "Invalid value mysql://x for configuration connection.url: Must be a postgresql:// URL"
        ],
        "timestamp.column.name": ["timestamp.column.name is required when mode is timestamp"],
    }
    connector.start({"connection.url": "jdbc:postgresql://h/db", "table.include.list": "a,b,c", "mode": "incrementing",
                     "incrementing.column.name": "id", "topic.prefix": "p"})  # fmt: skip
    assert [c["tables"] for c in connector.task_configs(2)] == ["a,b", "c"]
    assert [c["tables"] for c in connector.task_configs(5)] == ["a", "b", "c"]
    assert group_round_robin(["a", "b", "c", "d", "e"], 3) == [["a", "b"], ["c", "d"], ["e"]]


ROW = struct_schema(
    [("id", INT64_SCHEMA), ("name", STRING_SCHEMA), ("note", OPTIONAL_STRING_SCHEMA)], name="row"
)
KEY = struct_schema([("id", INT64_SCHEMA)])


def _row(id_: int, name: str, note: str | None = None) -> Struct:
    return Struct(ROW).put("id", id_).put("name", name).put("note", note)


def _sink(url: str, **config: str) -> PostgresSinkTask:
    full = {"connection.url": url, **config}
    task = PostgresSinkTask()
    task.initialize(BasicSinkTaskContext(full))
    task.start(full)
    return task


def _record(
    topic: str, offset: int, value: Any, key: Any = None, key_schema: Any = None
) -> SinkRecord:
    return SinkRecord.create(
        topic, 0, offset, value, value_schema=ROW, key=key, key_schema=key_schema
    )


def test_sink_insert_with_auto_create(pg_url: str) -> None:
    task = _sink(pg_url, **{"auto.create": "true", "table.name.format": "copy_${topic}"})
    task.put([_record("people", 0, _row(1, "ann")), _record("people", 1, _row(2, "bo", "x"))])
    task.put([_record("people", 1, _row(2, "bo", "x"))])  # a redelivery duplicates in insert mode
    assert _rows(pg_url, "SELECT id, name, note FROM copy_people ORDER BY id") == [
        (1, "ann", None),
        (2, "bo", "x"),
        (2, "bo", "x"),
    ]
    columns = _rows(pg_url, "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                            "WHERE table_name = 'copy_people' ORDER BY ordinal_position")  # fmt: skip
    assert columns == [("id", "bigint", "NO"), ("name", "text", "NO"), ("note", "text", "YES")]
    task.stop()


def test_sink_upsert_by_value_and_by_key(pg_url: str) -> None:
    by_value = _sink(
        pg_url,
        **{
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
        },
    )
    by_value.put(
        [
            _record("v", 0, _row(1, "ann")),
            _record("v", 1, _row(2, "bo")),
            _record("v", 2, _row(1, "ann2", "n")),
        ]
    )
    by_value.put([_record("v", 2, _row(1, "ann2", "n"))])
    assert _rows(pg_url, "SELECT id, name, note FROM v ORDER BY id") == [
        (1, "ann2", "n"),
        (2, "bo", None),
    ]
    assert _rows(pg_url, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                         "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'v'::regclass AND i.indisprimary") == [("id",)]  # fmt: skip
    by_value.stop()

    by_key = _sink(
        pg_url, **{"auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_key"}
    )
    key = Struct(KEY).put("id", 7)
    value = Struct(struct_schema([("name", STRING_SCHEMA)])).put("name", "x")
    rec = SinkRecord.create("k", 0, 0, value, value_schema=value.schema, key=key, key_schema=KEY)
    by_key.put([rec, rec.new_record(value=Struct(value.schema).put("name", "y"))])
    assert _rows(pg_url, "SELECT id, name FROM k") == [(7, "y")]
    by_key.stop()

    kafka = _sink(pg_url, **{"auto.create": "true", "insert.mode": "upsert", "pk.mode": "kafka"})
    kafka.put(
        [
            _record("kf", 5, _row(1, "a")),
            _record("kf", 5, _row(1, "a")),
            _record("kf", 6, _row(1, "b")),
        ]
    )
    assert _rows(
        pg_url,
        "SELECT __connect_topic, __connect_partition, __connect_offset, name FROM kf ORDER BY 3",
    ) == [
        ("kf", 0, 5, "a"),
        ("kf", 0, 6, "b"),
    ]
    kafka.stop()


def test_sink_errors(pg_url: str) -> None:
    task = _sink(pg_url)
    with pytest.raises(
        ConnectException, match='Table "public.missing" is missing and auto-creation is disabled'
    ):
        task.put([_record("missing", 0, _row(1, "a"))])
    with pytest.raises(ConnectException, match="requires records with a non-null Struct value"):
        task.put([SinkRecord.create("missing", 0, 3, {"id": 1})])
    task.stop()
    errors = {
        k: v.errors
        for k, v in PostgresSinkConnector()
        .validate({"connection.url": "postgresql://h/d", "insert.mode": "upsert"})
        .items()
        if v.errors
    }
    assert errors == {"pk.mode": ["pk.mode must not be none when insert.mode is upsert"]}


def test_table_copy_through_the_json_converter(pg_url: str) -> None:
    """Source rows -> JSON with schemas (as in Kafka) -> sink rows in another table."""
    _sql(
        pg_url,
        "CREATE TABLE src (id BIGINT PRIMARY KEY, amount NUMERIC(12,3), at TIMESTAMPTZ, day DATE, tag TEXT)",
        "INSERT INTO src SELECT g, g * 1.5, '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 minute',"
        " '2024-01-01'::date + g, 'tag' || g FROM generate_series(1, 250) g",
    )
    source = _source(pg_url, MemoryOffsetStore(), **{"table.include.list": "src", "mode": "incrementing",
                                                     "incrementing.column.name": "id", "batch.max.rows": "100"})  # fmt: skip
    converter = JsonConverter()
    converter.configure({}, False)
    sink = _sink(pg_url, **{"auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_value",
                            "pk.fields": "id", "table.name.format": "dst"})  # fmt: skip
    records = _drain(source)
    assert len(records) == 250
    sink_records = []
    for offset, r in enumerate(records):
        data = converter.from_connect_data(r.topic, r.value_schema, r.value)
        back = converter.to_connect_data(r.topic, data)
        sink_records.append(
            SinkRecord.create(r.topic, 0, offset, back.value, value_schema=back.schema)
        )
    sink.put(sink_records)
    assert _rows(pg_url, "SELECT count(*) FROM dst") == [(250,)]
    assert (
        _rows(
            pg_url,
            "(SELECT id, amount, at, day, tag FROM src EXCEPT SELECT id, amount, at, day, tag FROM dst)",
        )
        == []
    )
    source.stop()
    sink.stop()
