"""Connect's data model: schemas, structs and the built-in logical types.

Mirrors Kafka Connect's ``org.apache.kafka.connect.data`` in Python idiom: a
:class:`Schema` is an immutable description (type, optionality, default, name,
fields for structs, item/key/value schemas for arrays and maps); a :class:`Struct`
holds values for a struct schema and checks them on ``put``. Logical types (Decimal,
Date, Time, Timestamp) are named schemas over a primitive, as in Kafka.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oncelog.connect.api.errors import DataException


class SchemaType(enum.Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT)


DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
DECIMAL_SCALE = "scale"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"

_INT_BOUNDS = {
    SchemaType.INT8: 2**7,
    SchemaType.INT16: 2**15,
    SchemaType.INT32: 2**31,
    SchemaType.INT64: 2**63,
}


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """An immutable Connect schema. Build with the module-level constants and helpers
    (:func:`struct_schema`, :func:`array_schema`, …) or ``dataclasses.replace``."""

    type: SchemaType
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def field(self, name: str) -> Field | None:
        if self.type is not SchemaType.STRUCT:
            raise DataException("Cannot look up fields on non-struct type")
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def as_optional(self) -> Schema:
        return replace(self, optional=True)

    def __hash__(self) -> int:
        return hash((self.type, self.optional, self.name, self.version, self.fields))


def _primitive(type_: SchemaType, optional: bool = False) -> Schema:
    return Schema(type_, optional=optional)


INT8_SCHEMA = _primitive(SchemaType.INT8)
INT16_SCHEMA = _primitive(SchemaType.INT16)
INT32_SCHEMA = _primitive(SchemaType.INT32)
INT64_SCHEMA = _primitive(SchemaType.INT64)
FLOAT32_SCHEMA = _primitive(SchemaType.FLOAT32)
FLOAT64_SCHEMA = _primitive(SchemaType.FLOAT64)
BOOLEAN_SCHEMA = _primitive(SchemaType.BOOLEAN)
STRING_SCHEMA = _primitive(SchemaType.STRING)
BYTES_SCHEMA = _primitive(SchemaType.BYTES)
OPTIONAL_INT8_SCHEMA = _primitive(SchemaType.INT8, True)
OPTIONAL_INT16_SCHEMA = _primitive(SchemaType.INT16, True)
OPTIONAL_INT32_SCHEMA = _primitive(SchemaType.INT32, True)
OPTIONAL_INT64_SCHEMA = _primitive(SchemaType.INT64, True)
OPTIONAL_FLOAT32_SCHEMA = _primitive(SchemaType.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA = _primitive(SchemaType.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA = _primitive(SchemaType.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA = _primitive(SchemaType.STRING, True)
OPTIONAL_BYTES_SCHEMA = _primitive(SchemaType.BYTES, True)


def struct_schema(
    fields: Iterable[tuple[str, Schema]],
    *,
    name: str | None = None,
    optional: bool = False,
    version: int | None = None,
    doc: str | None = None,
) -> Schema:
    built: list[Field] = []
    for index, (field_name, schema) in enumerate(fields):
        if any(f.name == field_name for f in built):
            raise DataException(
                f"Cannot create field because of field name duplication {field_name}"
            )
        built.append(Field(field_name, index, schema))
    return Schema(
        SchemaType.STRUCT,
        optional=optional,
        name=name,
        version=version,
        doc=doc,
        fields=tuple(built),
    )


def array_schema(items: Schema, *, optional: bool = False) -> Schema:
    return Schema(SchemaType.ARRAY, optional=optional, value_schema=items)


def map_schema(keys: Schema, values: Schema, *, optional: bool = False) -> Schema:
    return Schema(SchemaType.MAP, optional=optional, key_schema=keys, value_schema=values)


def decimal_schema(scale: int, *, optional: bool = False) -> Schema:
    return Schema(
        SchemaType.BYTES,
        optional=optional,
        name=DECIMAL_NAME,
        version=1,
        parameters={DECIMAL_SCALE: str(scale)},
    )


def date_schema(*, optional: bool = False) -> Schema:
    return Schema(SchemaType.INT32, optional=optional, name=DATE_NAME, version=1)


def time_schema(*, optional: bool = False) -> Schema:
    return Schema(SchemaType.INT32, optional=optional, name=TIME_NAME, version=1)


def timestamp_schema(*, optional: bool = False) -> Schema:
    return Schema(SchemaType.INT64, optional=optional, name=TIMESTAMP_NAME, version=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _as_utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def logical_to_primitive(schema: Schema, value: Any) -> Any:
    """Encode a logical value (Decimal, date, time, datetime) as its underlying primitive."""
    if value is None:
        return None
    if schema.name == DECIMAL_NAME:
        scale = int((schema.parameters or {}).get(DECIMAL_SCALE, "0"))
        unscaled = int(decimal.Decimal(value).scaleb(scale).to_integral_value())
        length = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(length, "big", signed=True)
    if schema.name == DATE_NAME:
        if isinstance(value, dt.datetime):
            value = _as_utc(value).date()
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == TIME_NAME:
        return (
            (value.hour * 60 + value.minute) * 60 + value.second
        ) * 1000 + value.microsecond // 1000
    if schema.name == TIMESTAMP_NAME:
        delta = _as_utc(value) - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return value


def primitive_to_logical(schema: Schema, value: Any) -> Any:
    """Decode a logical type's primitive into its Python value."""
    if value is None:
        return None
    if schema.name == DECIMAL_NAME:
        scale = int((schema.parameters or {}).get(DECIMAL_SCALE, "0"))
        unscaled = int.from_bytes(value, "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-scale)
    if schema.name == DATE_NAME:
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    if schema.name == TIME_NAME:
        ms = int(value)
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).time()
    if schema.name == TIMESTAMP_NAME:
        return _EPOCH + dt.timedelta(milliseconds=int(value))
    return value


def validate_value(schema: Schema, value: Any, field_name: str | None = None) -> None:
    """Raise :class:`DataException` unless ``value`` fits ``schema`` (Kafka's
    ``ConnectSchema.validateValue``)."""
    where = f' for field: "{field_name}"' if field_name else ""
    if value is None:
        if not schema.optional:
            raise DataException(
                f"Invalid value: null used for required field{where}, schema type: {schema.type.name}"
            )
        return
    logical = {
        DECIMAL_NAME: (decimal.Decimal, int),
        DATE_NAME: (dt.date,),
        TIME_NAME: (dt.time,),
        TIMESTAMP_NAME: (dt.datetime,),
    }.get(schema.name or "")
    if logical is not None:
        if not isinstance(value, logical):
            raise DataException(
                f"Invalid Java object for logical type {schema.name}: {type(value).__name__}"
            )
        return
    t = schema.type
    ok: bool
    if t in _INT_BOUNDS:
        bound = _INT_BOUNDS[t]
        ok = isinstance(value, int) and not isinstance(value, bool) and -bound <= value < bound
    elif t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        ok = isinstance(value, float | int) and not isinstance(value, bool)
    elif t is SchemaType.BOOLEAN:
        ok = isinstance(value, bool)
    elif t is SchemaType.STRING:
        ok = isinstance(value, str)
    elif t is SchemaType.BYTES:
        ok = isinstance(value, bytes | bytearray | memoryview)
    elif t is SchemaType.ARRAY:
        ok = isinstance(value, list | tuple)
        if ok and schema.value_schema is not None:
            for item in value:
                validate_value(schema.value_schema, item, field_name)
    elif t is SchemaType.MAP:
        ok = isinstance(value, Mapping)
        if ok and schema.key_schema is not None and schema.value_schema is not None:
            for k, v in value.items():
                validate_value(schema.key_schema, k, field_name)
                validate_value(schema.value_schema, v, field_name)
    else:
        ok = isinstance(value, Struct) and value.schema == schema
        if isinstance(value, Struct) and not ok:
            raise DataException("Struct schemas do not match.")
    if not ok:
        raise DataException(
            f"Invalid Java object for schema with type {t.name}: {type(value).__name__}{where}"
        )


@dataclass
class Struct:
    """Values of a struct :class:`Schema`, checked as they are set."""

    schema: Schema
    _values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.schema.type is not SchemaType.STRUCT:
            raise DataException("Not a struct schema: " + str(self.schema))

    def _lookup(self, name: str) -> Field:
        f = self.schema.field(name)
        if f is None:
            raise DataException(f"{name} is not a valid field name")
        return f

    def put(self, name: str, value: Any) -> Struct:
        f = self._lookup(name)
        validate_value(f.schema, value, name)
        self._values[name] = value
        return self

    def get(self, name: str) -> Any:
        f = self._lookup(name)
        if name in self._values:
            return self._values[name]
        return f.schema.default

    def get_without_default(self, name: str) -> Any:
        self._lookup(name)
        return self._values.get(name)

    def validate(self) -> None:
        for f in self.schema.fields:
            validate_value(f.schema, self.get(f.name), f.name)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: self.get(f.name) for f in self.schema.fields}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Struct)
            and other.schema == self.schema
            and other.to_dict() == self.to_dict()
        )

    def __repr__(self) -> str:
        inner = ",".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"Struct{{{inner}}}"


@dataclass(frozen=True)
class SchemaAndValue:
    schema: Schema | None
    value: Any


NULL_SCHEMA_AND_VALUE = SchemaAndValue(None, None)
