"""What the PostgreSQL source and sink share: connection settings (Confluent JDBC
connector names), table names, and the mapping between PostgreSQL column types and
Connect schemas.

psycopg is imported where a connection is made, so discovering and validating
plugins never needs libpq.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncelog.connect.api.config import (
    ConfigDef,
    ConfigException,
    ConfigType,
    ConfigValue,
    Importance,
    Password,
)
from oncelog.connect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from oncelog.connect.api.errors import ConnectException

if TYPE_CHECKING:
    import psycopg

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"


def connection_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(CONNECTION_URL, ConfigType.STRING, importance=Importance.HIGH, group="Database", order_in_group=1,
                documentation="PostgreSQL connection URL, e.g. postgresql://host:5432/db (a jdbc: prefix is accepted).",
                validator=_url_validator)
        .define(CONNECTION_USER, ConfigType.STRING, None, None, Importance.HIGH, "PostgreSQL user.",
                group="Database", order_in_group=2)
        .define(CONNECTION_PASSWORD, ConfigType.PASSWORD, None, None, Importance.HIGH, "PostgreSQL password.",
                group="Database", order_in_group=3)
    )  # fmt: skip


CrossCheck = Callable[[Mapping[str, Any]], dict[str, str]]
"""Errors that depend on several keys, by the key they are reported on."""


def validate_checked(
    definition: ConfigDef, config: Mapping[str, str], cross_check: CrossCheck
) -> dict[str, ConfigValue]:
    """Per-key validation plus the cross-key errors (on keys that are valid on their own)."""
    result = definition.validate(config)
    values = {k: v.value for k, v in result.items() if not v.errors}
    for key, message in cross_check(values).items():
        result[key].add_error(message)
    return result


def parse_checked(
    definition: ConfigDef, config: Mapping[str, str], cross_check: CrossCheck
) -> dict[str, Any]:
    values = definition.parse(config)
    errors = cross_check(values)
    if errors:
        raise ConnectException("; ".join(errors.values()))
    return values


def _url_validator(name: str, value: Any) -> None:
    if value is None or not normalise_url(value).startswith(("postgresql://", "postgres://")):
        raise ConfigException(name, value, "Must be a postgresql:// URL")


def normalise_url(url: str) -> str:
    return url[len("jdbc:") :] if url.startswith("jdbc:") else url


def connect(values: Mapping[str, Any]) -> psycopg.Connection[Any]:
    """A connection in UTC, so timestamps without time zone read as UTC."""
    import psycopg

    password = values.get(CONNECTION_PASSWORD)
    kwargs: dict[str, Any] = {}
    if values.get(CONNECTION_USER):
        kwargs["user"] = values[CONNECTION_USER]
    if password is not None:
        kwargs["password"] = password.value() if isinstance(password, Password) else password
    conn = psycopg.connect(
        normalise_url(values[CONNECTION_URL]), options="-c TimeZone=UTC", **kwargs
    )
    return conn


@dataclass(frozen=True)
class TableId:
    schema: str
    table: str

    @classmethod
    def parse(cls, name: str) -> TableId:
        schema, dot, table = name.strip().rpartition(".")
        return cls(schema if dot else "public", table)

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str  # information_schema.columns.data_type
    nullable: bool
    numeric_scale: int | None


def read_columns(conn: psycopg.Connection[Any], table: TableId) -> list[Column]:
    rows = conn.execute(
        "SELECT column_name, data_type, is_nullable, numeric_scale FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        (table.schema, table.table),
    ).fetchall()
    return [Column(r[0], r[1], r[2] == "YES", r[3]) for r in rows]


_PRIMITIVES: dict[str, Schema] = {
    "smallint": INT16_SCHEMA,
    "integer": INT32_SCHEMA,
    "bigint": INT64_SCHEMA,
    "real": FLOAT32_SCHEMA,
    "double precision": FLOAT64_SCHEMA,
    "boolean": BOOLEAN_SCHEMA,
    "bytea": BYTES_SCHEMA,
}


def column_schema(column: Column) -> Schema:
    """Connect schema of a column (like Confluent's JDBC source with numeric.mapping=none);
    types without a Connect equivalent (json, uuid, …) become strings."""
    t = column.data_type
    if t in _PRIMITIVES:
        schema = _PRIMITIVES[t]
    elif t == "numeric":
        schema = (
            decimal_schema(column.numeric_scale)
            if column.numeric_scale is not None
            else FLOAT64_SCHEMA
        )
    elif t == "date":
        schema = date_schema()
    elif t.startswith("time ") or t == "time":
        schema = time_schema()
    elif t.startswith("timestamp"):
        schema = timestamp_schema()
    else:
        schema = STRING_SCHEMA
    return schema.as_optional() if column.nullable else schema
