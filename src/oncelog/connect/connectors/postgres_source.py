"""``PostgresSource``: stream new and changed rows of tables, like Confluent's JDBC
source connector.

Modes (``mode``):

- ``incrementing``: rows whose ``incrementing.column.name`` is above the last one seen
  (new rows of an append-only table);
- ``timestamp``: rows whose ``timestamp.column.name`` is after the last one seen and
  before ``now - timestamp.delay.interval.ms`` (updated rows; rows sharing the last
  timestamp seen before a crash can be missed, as in Confluent's connector);
- ``timestamp+incrementing``: ordered by (timestamp, id), which resumes exactly.

Tables (``table.include.list``) are spread over the tasks, one per task when
``tasks.max`` allows. Each table is a source partition
``{"protocol": "1", "table": "<schema>.<table>"}`` with offset
``{"incrementing": id}`` and/or ``{"timestamp": ms, "timestamp_nanos": ns}``
(Confluent's keys), so tasks resume from stored offsets. Rows are read through a
server-side cursor, ``batch.max.rows`` per poll; a table is queried again
``poll.interval.ms`` after its result set was exhausted.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oncelog.connect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from oncelog.connect.api.config_validators import Range, ValidString, non_empty_string
from oncelog.connect.api.connector import (
    Config,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from oncelog.connect.api.data import Schema, SchemaType, Struct, struct_schema
from oncelog.connect.api.errors import ConfigException, ConnectException
from oncelog.connect.api.version import VERSION
from oncelog.connect.connectors.postgres_common import (
    Column,
    TableId,
    column_schema,
    connect,
    connection_config_def,
    parse_checked,
    read_columns,
    validate_checked,
)

if TYPE_CHECKING:
    import psycopg

TABLES = "table.include.list"
MODE = "mode"
INCREMENTING_COLUMN = "incrementing.column.name"
TIMESTAMP_COLUMN = "timestamp.column.name"
TOPIC_PREFIX = "topic.prefix"
POLL_INTERVAL_MS = "poll.interval.ms"
BATCH_MAX_ROWS = "batch.max.rows"
TIMESTAMP_DELAY_MS = "timestamp.delay.interval.ms"
TASK_TABLES = "tables"  # task config: the tables of one task

MODE_INCREMENTING = "incrementing"
MODE_TIMESTAMP = "timestamp"
MODE_TIMESTAMP_INCREMENTING = "timestamp+incrementing"

INCREMENTING_FIELD = "incrementing"
TIMESTAMP_FIELD = "timestamp"
TIMESTAMP_NANOS_FIELD = "timestamp_nanos"

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def source_config_def() -> ConfigDef:
    return connection_config_def().merge(
        ConfigDef()
        .define(TABLES, ConfigType.LIST, validator=_non_empty_list, importance=Importance.HIGH, group="Database",
                order_in_group=4, documentation="Tables to copy, as table or schema.table (schema defaults to public).")
        .define(MODE, ConfigType.STRING,
                validator=ValidString(MODE_INCREMENTING, MODE_TIMESTAMP, MODE_TIMESTAMP_INCREMENTING),
                importance=Importance.HIGH, group="Mode", order_in_group=1,
                documentation="How new rows are found: incrementing, timestamp or timestamp+incrementing.")
        .define(INCREMENTING_COLUMN, ConfigType.STRING, "", None, Importance.MEDIUM,
                "A strictly increasing column (incrementing modes).", group="Mode", order_in_group=2)
        .define(TIMESTAMP_COLUMN, ConfigType.STRING, "", None, Importance.MEDIUM,
                "A timestamp column set on insert and update (timestamp modes).", group="Mode", order_in_group=3)
        .define(TIMESTAMP_DELAY_MS, ConfigType.LONG, 0, Range.at_least(0), Importance.HIGH,
                "How long after a timestamp a row is read, to let transactions with that timestamp complete.",
                group="Mode", order_in_group=4)
        .define(TOPIC_PREFIX, ConfigType.STRING, validator=lambda n, v: non_empty_string(n, v),
                importance=Importance.HIGH, group="Connector", order_in_group=1,
                documentation="Prefix of the topic names: each table goes to <prefix><table>.")
        .define(POLL_INTERVAL_MS, ConfigType.INT, 5000, Range.at_least(1), Importance.HIGH,
                "How often a table is queried for new rows.", group="Connector", order_in_group=2)
        .define(BATCH_MAX_ROWS, ConfigType.INT, 100, Range.at_least(1), Importance.LOW,
                "The most rows one poll returns.", group="Connector", order_in_group=3)
    )  # fmt: skip


def _non_empty_list(name: str, value: Any) -> None:
    if not value or not all(v.strip() for v in value):
        raise ConfigException(name, ",".join(value or []), "Must list at least one table")


def _cross_check(values: Mapping[str, Any]) -> dict[str, str]:
    """Errors that depend on several keys, by the key they are reported on."""
    mode = values.get(MODE)
    errors = {}
    if mode in (MODE_INCREMENTING, MODE_TIMESTAMP_INCREMENTING) and not values.get(
        INCREMENTING_COLUMN
    ):
        errors[INCREMENTING_COLUMN] = f"{INCREMENTING_COLUMN} is required when mode is {mode}"
    if mode in (MODE_TIMESTAMP, MODE_TIMESTAMP_INCREMENTING) and not values.get(TIMESTAMP_COLUMN):
        errors[TIMESTAMP_COLUMN] = f"{TIMESTAMP_COLUMN} is required when mode is {mode}"
    return errors


def group_round_robin(items: list[str], groups: int) -> list[list[str]]:
    """Split ``items`` into at most ``groups`` contiguous, near-equal groups (Kafka's
    ``ConnectorUtils.groupPartitions``)."""
    groups = min(groups, len(items))
    out: list[list[str]] = []
    start = 0
    for i in range(groups):
        size = len(items) // groups + (1 if i < len(items) % groups else 0)
        out.append(items[start : start + size])
        start += size
    return out


class PostgresSourceConnector(SourceConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return source_config_def()

    def validate(self, config: Mapping[str, str]) -> dict[str, ConfigValue]:
        return validate_checked(source_config_def(), config, _cross_check)

    def start(self, config: Config) -> None:
        values = parse_checked(source_config_def(), config, _cross_check)
        self._config = dict(config)
        self._tables = [t.strip() for t in values[TABLES]]

    def task_class(self) -> type[Task]:
        return PostgresSourceTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [
            {**self._config, TASK_TABLES: ",".join(group)}
            for group in group_round_robin(self._tables, max_tasks)
        ]

    def stop(self) -> None:
        return None

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Each table goes to one task and resumes exactly from its stored offset, except in
        # ``timestamp`` mode, where rows sharing the last timestamp seen can be missed.
        mode = config.get(MODE, "")
        if mode in (MODE_INCREMENTING, MODE_TIMESTAMP_INCREMENTING):
            return ExactlyOnceSupport.SUPPORTED
        return ExactlyOnceSupport.UNSUPPORTED


def source_partition(table: TableId) -> dict[str, Any]:
    return {"protocol": "1", "table": str(table)}


def _to_epoch(moment: dt.datetime) -> tuple[int, int]:
    """(ms since the epoch, nanoseconds within the second), Confluent's offset fields."""
    aware = moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)
    delta = aware - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return seconds * 1000 + delta.microseconds // 1000, delta.microseconds * 1000


def _from_epoch(ms: int, nanos: int | None) -> dt.datetime:
    seconds, rest_ms = divmod(ms, 1000)
    micros = nanos // 1000 if nanos is not None else rest_ms * 1000
    return _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)


@dataclass
class _TableReader:
    """Query state of one table: its offset, its open cursor and when to query next."""

    table: TableId
    columns: list[Column]
    naive_timestamps: bool
    incrementing: int | None = None
    timestamp: dt.datetime | None = None
    cursor: psycopg.ServerCursor[Any] | None = None
    next_query_at: float = 0.0
    schema: Any = field(default=None)


class PostgresSourceTask(SourceTask):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # stop() runs on another thread than poll()
        self._conn: psycopg.Connection[Any] | None = None

    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        values = source_config_def().parse(config)
        self.mode: str = values[MODE]
        self.inc_column: str = values[INCREMENTING_COLUMN]
        self.ts_column: str = values[TIMESTAMP_COLUMN]
        self.topic_prefix: str = values[TOPIC_PREFIX]
        self.poll_interval_s = values[POLL_INTERVAL_MS] / 1000
        self.batch_max_rows: int = values[BATCH_MAX_ROWS]
        self.delay_ms: int = values[TIMESTAMP_DELAY_MS]
        tables = [
            TableId.parse(t)
            for t in config.get(TASK_TABLES, ",".join(values[TABLES])).split(",")
            if t
        ]
        self._stopping.clear()
        self._conn = connect(values)
        offsets = self.context.offset_storage_reader()
        self._readers: list[_TableReader] = []
        for table in tables:
            self._readers.append(self._reader(table, offsets.offset(source_partition(table))))
        self._conn.commit()

    def _reader(self, table: TableId, offset: Mapping[str, Any] | None) -> _TableReader:
        assert self._conn is not None
        columns = read_columns(self._conn, table)
        if not columns:
            raise ConnectException(f"Table {table} does not exist or has no columns")
        by_name = {c.name: c for c in columns}
        for needed in [c for c in (self.inc_column, self.ts_column) if c]:
            if needed not in by_name:
                raise ConnectException(f"Column {needed} not found in table {table}")
        naive = (
            bool(self.ts_column)
            and by_name[self.ts_column].data_type == "timestamp without time zone"
        )
        schema = struct_schema([(c.name, column_schema(c)) for c in columns], name=table.table)
        reader = _TableReader(table, columns, naive, schema=schema)
        if offset is not None:
            if offset.get(INCREMENTING_FIELD) is not None:
                reader.incrementing = int(offset[INCREMENTING_FIELD])
            if offset.get(TIMESTAMP_FIELD) is not None:
                reader.timestamp = _from_epoch(
                    int(offset[TIMESTAMP_FIELD]), offset.get(TIMESTAMP_NANOS_FIELD)
                )
        return reader

    def _query(self, reader: _TableReader) -> Any:
        from psycopg import sql

        table = sql.Identifier(reader.table.schema, reader.table.table)
        inc = sql.Identifier(self.inc_column) if self.inc_column else None
        ts = sql.Identifier(self.ts_column) if self.ts_column else None
        end = sql.SQL("(now() - make_interval(secs => {}))").format(
            sql.Literal(self.delay_ms / 1000)
        )
        last_inc = reader.incrementing if reader.incrementing is not None else -1
        last_ts = reader.timestamp or _EPOCH
        if reader.naive_timestamps:
            last_ts = last_ts.astimezone(dt.UTC).replace(tzinfo=None)
        if self.mode == MODE_INCREMENTING:
            return sql.SQL("SELECT * FROM {t} WHERE {inc} > {v} ORDER BY {inc} ASC").format(
                t=table, inc=inc, v=sql.Literal(last_inc)
            )
        if self.mode == MODE_TIMESTAMP:
            return sql.SQL(
                "SELECT * FROM {t} WHERE {ts} > {v} AND {ts} < {end} ORDER BY {ts} ASC"
            ).format(t=table, ts=ts, v=sql.Literal(last_ts), end=end)
        return sql.SQL(
            "SELECT * FROM {t} WHERE {ts} < {end} AND (({ts} = {vts} AND {inc} > {vinc}) OR {ts} > {vts}) "
            "ORDER BY {ts} ASC, {inc} ASC"
        ).format(
            t=table, ts=ts, inc=inc, end=end, vts=sql.Literal(last_ts), vinc=sql.Literal(last_inc)
        )

    def poll(self) -> list[SourceRecord] | None:
        with self._lock:
            if self._stopping.is_set() or self._conn is None:
                return None
            reader = min(self._readers, key=lambda r: r.next_query_at)
            wait = reader.next_query_at - self._clock()
        if wait > 0 and self._stopping.wait(wait):
            return None
        with self._lock:
            if self._stopping.is_set() or self._conn is None:
                return None
            return self._read_batch(reader)

    def _read_batch(self, reader: _TableReader) -> list[SourceRecord] | None:
        assert self._conn is not None
        if reader.cursor is None:
            reader.cursor = self._conn.cursor(name=f"oncelog_{self._readers.index(reader)}")
            reader.cursor.execute(self._query(reader))
        rows = reader.cursor.fetchmany(self.batch_max_rows)
        if len(rows) < self.batch_max_rows:
            # Result set exhausted: end the read transaction, query again after the interval.
            reader.cursor.close()
            reader.cursor = None
            self._conn.commit()
            reader.next_query_at = self._clock() + self.poll_interval_s
        return [self._record(reader, row) for row in rows] or None

    def _record(self, reader: _TableReader, row: tuple[Any, ...]) -> SourceRecord:
        value = Struct(reader.schema)
        for f, cell in zip(reader.schema.fields, row, strict=True):
            value.put(f.name, _cell(f.schema, cell))
        offset: dict[str, Any] = {}
        if self.inc_column:
            reader.incrementing = int(value.get(self.inc_column))
            offset[INCREMENTING_FIELD] = reader.incrementing
        if self.ts_column:
            moment = value.get(self.ts_column)
            reader.timestamp = moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment
            offset[TIMESTAMP_FIELD], offset[TIMESTAMP_NANOS_FIELD] = _to_epoch(moment)
        return SourceRecord.create(
            source_partition(reader.table),
            offset,
            self.topic_prefix + reader.table.table,
            value,
            value_schema=reader.schema,
        )

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _cell(schema: Schema, cell: Any) -> Any:
    """A row value as its Connect schema expects it."""
    if cell is None:
        return None
    if schema.name is None and schema.type is SchemaType.STRING and not isinstance(cell, str):
        return json.dumps(cell, default=str) if isinstance(cell, dict | list) else str(cell)
    if schema.type is SchemaType.FLOAT64 and not isinstance(cell, float):
        return float(cell)
    if schema.type is SchemaType.BYTES and schema.name is None:
        return bytes(cell)
    return cell
