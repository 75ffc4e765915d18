"""``PostgresSink``: write records into tables, like Confluent's JDBC sink connector.

Record values must be structs with a schema (e.g. JSON with schemas enabled).
``insert.mode=insert`` appends rows; ``upsert`` uses ``INSERT … ON CONFLICT (pk) DO
UPDATE``, which makes redelivered records (at-least-once) idempotent. The primary
key comes from ``pk.mode``: ``record_key`` (the key struct's fields, or a primitive
key named by the one entry of ``pk.fields``), ``record_value`` (fields of the
value), ``kafka`` (``__connect_topic``, ``__connect_partition``,
``__connect_offset``) or ``none``. ``table.name.format`` maps topics to tables
(``${topic}``), and ``auto.create`` creates missing tables from the record schema.
Each ``put`` is written in one database transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncelog.connect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from oncelog.connect.api.config_validators import Range, ValidString
from oncelog.connect.api.connector import (
    Config,
    SinkConnector,
    SinkRecord,
    SinkTask,
    Task,
    TopicPartition,
)
from oncelog.connect.api.data import (
    DATE_NAME,
    DECIMAL_NAME,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SchemaType,
    Struct,
)
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.version import VERSION
from oncelog.connect.connectors.postgres_common import (
    TableId,
    connect,
    connection_config_def,
    parse_checked,
    validate_checked,
)

if TYPE_CHECKING:
    import psycopg

INSERT_MODE = "insert.mode"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
AUTO_CREATE = "auto.create"
TABLE_NAME_FORMAT = "table.name.format"
BATCH_SIZE = "batch.size"

KAFKA_PK_NAMES = ("__connect_topic", "__connect_partition", "__connect_offset")


def sink_config_def() -> ConfigDef:
    return connection_config_def().merge(
        ConfigDef()
        .define(INSERT_MODE, ConfigType.STRING, "insert", ValidString("insert", "upsert"), Importance.HIGH,
                "insert: plain INSERT; upsert: INSERT ... ON CONFLICT (primary key) DO UPDATE.",
                group="Writes", order_in_group=1)
        .define(BATCH_SIZE, ConfigType.INT, 3000, Range.at_least(1), Importance.MEDIUM,
                "Rows sent to the database per statement batch.", group="Writes", order_in_group=2)
        .define(TABLE_NAME_FORMAT, ConfigType.STRING, "${topic}", None, Importance.MEDIUM,
                "Destination table name; ${topic} is replaced by the record's topic.", group="Data Mapping",
                order_in_group=1)
        .define(PK_MODE, ConfigType.STRING, "none", ValidString("none", "kafka", "record_key", "record_value"),
                Importance.HIGH, "Where the primary key comes from.", group="Data Mapping", order_in_group=2)
        .define(PK_FIELDS, ConfigType.LIST, [], None, Importance.MEDIUM,
                "Primary key field names; empty means every field of the key (record_key) or value (record_value).",
                group="Data Mapping", order_in_group=3)
        .define(AUTO_CREATE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
                "Create a missing destination table from the record schema.", group="DDL Support", order_in_group=1)
    )  # fmt: skip


def _cross_check(values: Mapping[str, Any]) -> dict[str, str]:
    errors = {}
    if values.get(INSERT_MODE) == "upsert" and values.get(PK_MODE) == "none":
        errors[PK_MODE] = "pk.mode must not be none when insert.mode is upsert"
    if values.get(PK_MODE) == "kafka" and values.get(PK_FIELDS) and len(values[PK_FIELDS]) != 3:
        errors[PK_FIELDS] = (
            "pk.mode kafka needs exactly 3 pk.fields (topic, partition, offset) or none"
        )
    return errors


class PostgresSinkConnector(SinkConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return sink_config_def()

    def validate(self, config: Mapping[str, str]) -> dict[str, ConfigValue]:
        return validate_checked(sink_config_def(), config, _cross_check)

    def start(self, config: Config) -> None:
        parse_checked(sink_config_def(), config, _cross_check)
        self._config = dict(config)

    def task_class(self) -> type[Task]:
        return PostgresSinkTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [dict(self._config) for _ in range(max_tasks)]

    def stop(self) -> None:
        return None

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        return True  # the sink stores no offsets in the database


@dataclass(frozen=True)
class _Row:
    table: TableId
    columns: tuple[tuple[str, Schema], ...]  # name and schema, primary key columns first
    pk: tuple[str, ...]
    values: tuple[Any, ...]


_DDL_TYPES = {
    SchemaType.INT8: "SMALLINT",
    SchemaType.INT16: "SMALLINT",
    SchemaType.INT32: "INTEGER",
    SchemaType.INT64: "BIGINT",
    SchemaType.FLOAT32: "REAL",
    SchemaType.FLOAT64: "DOUBLE PRECISION",
    SchemaType.BOOLEAN: "BOOLEAN",
    SchemaType.STRING: "TEXT",
    SchemaType.BYTES: "BYTEA",
    SchemaType.ARRAY: "JSONB",
    SchemaType.MAP: "JSONB",
    SchemaType.STRUCT: "JSONB",
}
_DDL_LOGICAL = {
    DECIMAL_NAME: "NUMERIC",
    DATE_NAME: "DATE",
    TIME_NAME: "TIME",
    TIMESTAMP_NAME: "TIMESTAMP",
}


def ddl_type(schema: Schema) -> str:
    return _DDL_LOGICAL.get(schema.name or "", _DDL_TYPES[schema.type])


class PostgresSinkTask(SinkTask):
    def __init__(self) -> None:
        self._conn: psycopg.Connection[Any] | None = None
        self._known_tables: set[TableId] = set()

    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        values = parse_checked(sink_config_def(), config, _cross_check)
        self.insert_mode: str = values[INSERT_MODE]
        self.pk_mode: str = values[PK_MODE]
        self.pk_fields: list[str] = values[PK_FIELDS]
        self.auto_create: bool = values[AUTO_CREATE]
        self.table_format: str = values[TABLE_NAME_FORMAT]
        self.batch_size: int = values[BATCH_SIZE]
        self._conn = connect(values)

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        assert self._conn is not None
        rows = [self._row(r) for r in records]
        with self._conn.transaction():
            for table in dict.fromkeys(r.table for r in rows):
                self._ensure_table(next(r for r in rows if r.table == table))
            # Consecutive rows with the same shape share one statement.
            start = 0
            while start < len(rows):
                end = start
                while (
                    end < len(rows)
                    and rows[end].table == rows[start].table
                    and rows[end].columns == rows[start].columns
                ):
                    end += 1
                for chunk in range(start, end, self.batch_size):
                    batch = rows[chunk : min(end, chunk + self.batch_size)]
                    with self._conn.cursor() as cur:
                        cur.executemany(self._statement(batch[0]), [r.values for r in batch])
                start = end

    def _row(self, record: SinkRecord) -> _Row:
        if not isinstance(record.value, Struct) or record.value_schema is None:
            raise ConnectException(
                f"PostgresSink requires records with a non-null Struct value and non-null Struct schema, but found "
                f"record at (topic='{record.topic}',partition={record.kafka_partition},offset={record.kafka_offset}) "
                f"with a {type(record.value).__name__} value and {'null' if record.value_schema is None else 'a'} value schema."
            )
        value: Struct = record.value
        table = TableId.parse(self.table_format.replace("${topic}", record.topic))
        pk_cols: list[tuple[str, Schema, Any]] = []
        if self.pk_mode == "kafka":
            names = self.pk_fields or list(KAFKA_PK_NAMES)
            pk_cols = [
                (names[0], STRING_SCHEMA, record.original_topic),
                (names[1], INT32_SCHEMA, record.original_kafka_partition),
                (names[2], INT64_SCHEMA, record.original_kafka_offset),
            ]
        elif self.pk_mode == "record_key":
            pk_cols = self._key_columns(record)
        elif self.pk_mode == "record_value":
            names = self.pk_fields or [f.name for f in value.schema.fields]
            for name in names:
                field = value.schema.field(name)
                if field is None:
                    raise ConnectException(
                        f"PK field '{name}' is not in the value schema of topic {record.topic}"
                    )
                pk_cols.append((name, field.schema, value.get(name)))
        pk_names = {c[0] for c in pk_cols}
        rest = [
            (f.name, f.schema, value.get(f.name))
            for f in value.schema.fields
            if f.name not in pk_names
        ]
        columns = tuple((name, schema) for name, schema, _ in pk_cols + rest)
        values = tuple(_sql_value(schema, v) for _, schema, v in pk_cols + rest)
        return _Row(table, columns, tuple(c[0] for c in pk_cols), values)

    def _key_columns(self, record: SinkRecord) -> list[tuple[str, Schema, Any]]:
        if record.key is None or record.key_schema is None:
            raise ConnectException(
                f"pk.mode record_key needs a non-null key with a schema (topic {record.topic}, offset {record.kafka_offset})"
            )
        if isinstance(record.key, Struct):
            names = self.pk_fields or [f.name for f in record.key.schema.fields]
            out = []
            for name in names:
                field = record.key.schema.field(name)
                if field is None:
                    raise ConnectException(
                        f"PK field '{name}' is not in the key schema of topic {record.topic}"
                    )
                out.append((name, field.schema, record.key.get(name)))
            return out
        if len(self.pk_fields) != 1:
            raise ConnectException("A primitive record key needs exactly one pk.fields name")
        return [(self.pk_fields[0], record.key_schema, record.key)]

    def _ensure_table(self, row: _Row) -> None:
        if row.table in self._known_tables:
            return
        assert self._conn is not None
        from psycopg import sql

        exists = self._conn.execute(
            "SELECT to_regclass(%s)", (f'"{row.table.schema}"."{row.table.table}"',)
        ).fetchone()
        if exists is None or exists[0] is None:
            if not self.auto_create:
                raise ConnectException(
                    f'Table "{row.table}" is missing and auto-creation is disabled'
                )
            columns = [
                sql.SQL("{} {}{}").format(
                    sql.Identifier(name),
                    sql.SQL(ddl_type(schema)),
                    sql.SQL("" if schema.optional else " NOT NULL"),
                )
                for name, schema in row.columns
            ]
            if row.pk:
                columns.append(
                    sql.SQL("PRIMARY KEY ({})").format(
                        sql.SQL(", ").join(map(sql.Identifier, row.pk))
                    )
                )
            self._conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                    sql.Identifier(row.table.schema, row.table.table), sql.SQL(", ").join(columns)
                )
            )
        self._known_tables.add(row.table)

    def _statement(self, row: _Row) -> Any:
        from psycopg import sql

        names = [name for name, _ in row.columns]
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(row.table.schema, row.table.table),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(sql.Placeholder() * len(names)),
        )
        if self.insert_mode != "upsert":
            return insert
        updates = [n for n in names if n not in row.pk]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in updates
                )
            )
            if updates
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("{} ON CONFLICT ({}) {}").format(
            insert, sql.SQL(", ").join(map(sql.Identifier, row.pk)), action
        )

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        return None  # every put is committed before it returns

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _sql_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type in (SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT) and schema.name is None:
        from psycopg.types.json import Jsonb

        return Jsonb(_plain(value))
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return {k: _plain(v) for k, v in value.to_dict().items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value
