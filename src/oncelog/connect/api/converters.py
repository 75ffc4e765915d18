"""Converters between Connect data (schema + value) and the bytes stored in Kafka.

- :class:`JsonConverter`: Kafka's ``JsonConverter``. With ``schemas.enable=true`` (the
  default) every message is the envelope ``{"schema": …, "payload": …}`` with Kafka's
  schema JSON; without, the bare JSON value.
- :class:`StringConverter`: UTF-8 (``converter.encoding``) strings.
- :class:`ByteArrayConverter`: bytes passed through unchanged.
"""

from __future__ import annotations

import abc
import base64
import codecs
import decimal
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import ValidString
from oncelog.connect.api.data import (
    DATE_NAME,
    DECIMAL_NAME,
    NULL_SCHEMA_AND_VALUE,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Field,
    Schema,
    SchemaAndValue,
    SchemaType,
    Struct,
    logical_to_primitive,
    primitive_to_logical,
    validate_value,
)
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.records import Headers


class Converter(abc.ABC):
    """Kafka's ``Converter``: configured once for keys or for values."""

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Apply converter settings (already stripped of ``key.converter.`` etc.)."""
        return None

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    @abc.abstractmethod
    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None: ...

    @abc.abstractmethod
    def to_connect_data(
        self, topic: str, data: bytes | None, headers: Headers | None = None
    ) -> SchemaAndValue: ...


# --- JSON ------------------------------------------------------------------------------

_ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)


def schema_to_json(schema: Schema | None) -> dict[str, Any] | None:
    """Kafka's JSON form of a schema (``JsonConverter.asJsonSchema``)."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": schema.type.value}
    if schema.type is SchemaType.ARRAY:
        out["items"] = schema_to_json(schema.value_schema)
    elif schema.type is SchemaType.MAP:
        out["keys"] = schema_to_json(schema.key_schema)
        out["values"] = schema_to_json(schema.value_schema)
    elif schema.type is SchemaType.STRUCT:
        fields = []
        for f in schema.fields:
            fj = schema_to_json(f.schema)
            assert fj is not None
            fj["field"] = f.name
            fields.append(fj)
        out["fields"] = fields
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = _value_to_json(schema, schema.default)
    return out


def schema_from_json(node: Any) -> Schema | None:
    """Parse Kafka's JSON schema form (``JsonConverter.asConnectSchema``)."""
    if node is None:
        return None
    if not isinstance(node, dict):
        raise DataException("Schema must be a JSON object")
    type_name = node.get("type")
    try:
        type_ = SchemaType(type_name)
    except ValueError:
        raise DataException(f"Unknown schema type: {type_name}") from None
    kwargs: dict[str, Any] = {}
    if type_ is SchemaType.ARRAY:
        if "items" not in node:
            raise DataException("Array schema did not specify the element type")
        kwargs["value_schema"] = schema_from_json(node["items"])
    elif type_ is SchemaType.MAP:
        if "keys" not in node or "values" not in node:
            raise DataException("Map schema did not specify the key and value types")
        kwargs["key_schema"] = schema_from_json(node["keys"])
        kwargs["value_schema"] = schema_from_json(node["values"])
    elif type_ is SchemaType.STRUCT:
        fields_node = node.get("fields")
        if not isinstance(fields_node, list):
            raise DataException('Struct schema\'s "fields" argument is not an array.')
        fields = []
        for index, fnode in enumerate(fields_node):
            name = fnode.get("field") if isinstance(fnode, dict) else None
            if not isinstance(name, str):
                raise DataException("Struct schema's field name not specified properly")
            sub = schema_from_json(fnode)
            assert sub is not None
            fields.append(Field(name, index, sub))
        kwargs["fields"] = tuple(fields)
    schema = Schema(
        type_,
        optional=bool(node.get("optional", False)),
        name=node.get("name"),
        version=node.get("version"),
        doc=node.get("doc"),
        parameters=node.get("parameters"),
        **kwargs,
    )
    if node.get("default") is not None:
        schema = replace(schema, default=_value_from_json(schema, node["default"]))
    return schema


def _value_to_json(schema: Schema | None, value: Any, decimal_numeric: bool = False) -> Any:
    if value is None:
        if schema is None or schema.optional and schema.default is None:
            return None
        if schema.default is not None:
            return _value_to_json(schema, schema.default, decimal_numeric)
        raise DataException(
            "Conversion error: null value for field that is required and has no default value"
        )
    if schema is None:
        return _schemaless_to_json(value)
    validate_value(schema, value)
    if schema.name == DECIMAL_NAME and decimal_numeric:
        return decimal.Decimal(value)
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        value = logical_to_primitive(schema, value)
    t = schema.type
    if t is SchemaType.BYTES:
        return base64.b64encode(bytes(value)).decode("ascii")
    if t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    if t is SchemaType.ARRAY:
        return [_value_to_json(schema.value_schema, v, decimal_numeric) for v in value]
    if t is SchemaType.MAP:
        assert schema.key_schema is not None
        if schema.key_schema.type is SchemaType.STRING:
            return {
                k: _value_to_json(schema.value_schema, v, decimal_numeric) for k, v in value.items()
            }
        # Non-string keys: Kafka writes an array of [key, value] pairs.
        return [
            [
                _value_to_json(schema.key_schema, k, decimal_numeric),
                _value_to_json(schema.value_schema, v, decimal_numeric),
            ]
            for k, v in value.items()
        ]
    if t is SchemaType.STRUCT:
        return {
            f.name: _value_to_json(f.schema, value.get(f.name), decimal_numeric)
            for f in schema.fields
        }
    return value


def _schemaless_to_json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list | tuple):
        return [_schemaless_to_json(v) for v in value]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v) for k, v in value.items()}
        return [[_schemaless_to_json(k), _schemaless_to_json(v)] for k, v in value.items()]
    if isinstance(value, Struct):
        raise DataException("Conversion error: schema-less Struct values are not supported")
    if isinstance(value, decimal.Decimal):
        return value
    raise DataException(f"Couldn't convert {value!r} to JSON.")


def _value_from_json(schema: Schema | None, node: Any) -> Any:
    if schema is None:
        return _schemaless_from_json(node)
    if node is None:
        if schema.default is not None:
            return schema.default
        if schema.optional:
            return None
        raise DataException("Invalid null value for required " + schema.type.name + " field")
    t = schema.type
    value: Any
    if t in (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
        if isinstance(node, bool) or not isinstance(node, int):
            raise DataException(f"Invalid type for {t.name}: {type(node).__name__}")
        value = node
    elif t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
            raise DataException(f"Invalid type for {t.name}: {type(node).__name__}")
        value = float(node)
    elif t is SchemaType.BOOLEAN:
        if not isinstance(node, bool):
            raise DataException(f"Invalid type for BOOLEAN: {type(node).__name__}")
        value = node
    elif t is SchemaType.STRING:
        if not isinstance(node, str):
            raise DataException(f"Invalid type for STRING: {type(node).__name__}")
        value = node
    elif t is SchemaType.BYTES:
        if schema.name == DECIMAL_NAME and isinstance(node, int | float | decimal.Decimal):
            return decimal.Decimal(str(node))
        if not isinstance(node, str):
            raise DataException(f"Invalid type for BYTES: {type(node).__name__}")
        value = base64.b64decode(node)
    elif t is SchemaType.ARRAY:
        if not isinstance(node, list):
            raise DataException("Invalid type for ARRAY")
        value = [_value_from_json(schema.value_schema, v) for v in node]
    elif t is SchemaType.MAP:
        assert schema.key_schema is not None
        if schema.key_schema.type is SchemaType.STRING:
            if not isinstance(node, dict):
                raise DataException(
                    "Maps with string fields should be encoded as JSON objects, but found "
                    + type(node).__name__
                )
            value = {k: _value_from_json(schema.value_schema, v) for k, v in node.items()}
        else:
            if not isinstance(node, list):
                raise DataException(
                    "Maps with non-string fields should be encoded as JSON array of tuples"
                )
            value = {}
            for entry in node:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise DataException("Found invalid map entry instead of array tuple")
                value[_value_from_json(schema.key_schema, entry[0])] = _value_from_json(
                    schema.value_schema, entry[1]
                )
    else:
        if not isinstance(node, dict):
            raise DataException(
                "Structs should be encoded as JSON objects, but found " + type(node).__name__
            )
        struct = Struct(schema)
        for f in schema.fields:
            struct.put(f.name, _value_from_json(f.schema, node.get(f.name)))
        return struct
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        return primitive_to_logical(schema, value)
    return value


def _schemaless_from_json(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)  # JSON fractions: Kafka reads them as FLOAT64 without a schema
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    return node


class JsonConverter(Converter):
    """Kafka's ``org.apache.kafka.connect.json.JsonConverter``."""

    SCHEMAS_ENABLE = "schemas.enable"
    DECIMAL_FORMAT = "decimal.format"

    def __init__(self) -> None:
        self.schemas_enabled = True
        self.decimal_numeric = False

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(self.SCHEMAS_ENABLE, ConfigType.BOOLEAN, True, None, Importance.HIGH,
                    "Include schemas within each of the serialized values and keys.")
            .define("schemas.cache.size", ConfigType.INT, 1000, None, Importance.HIGH,
                    "The maximum number of schemas that can be cached in this converter instance.")
            .define(self.DECIMAL_FORMAT, ConfigType.STRING, "BASE64", ValidString("BASE64", "NUMERIC", case_sensitive=False),
                    Importance.LOW, "How decimals are serialized: BASE64 (bytes) or NUMERIC (JSON numbers).")
            .define("replace.null.with.default", ConfigType.BOOLEAN, True, None, Importance.LOW,
                    "Whether to replace fields that have a default value and that are null with the default.")
            .define("converter.type", ConfigType.STRING, "value", ValidString("key", "value", "header"),
                    Importance.LOW, "How this converter will be used.")
        )  # fmt: skip

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        known = {k: v for k, v in configs.items() if k in self.config_def()}
        values = self.config_def().parse(known)
        self.schemas_enabled = values[self.SCHEMAS_ENABLE]
        self.decimal_numeric = values[self.DECIMAL_FORMAT].upper() == "NUMERIC"

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is None and value is None:
            return None  # a tombstone stays a tombstone
        try:
            payload = _value_to_json(schema, value, self.decimal_numeric)
        except DataException as exc:
            raise DataException(
                f"Converting Kafka Connect data to byte[] failed due to serialization error of topic {topic}: {exc}"
            ) from exc
        node = (
            {"schema": schema_to_json(schema), "payload": payload}
            if self.schemas_enabled
            else payload
        )
        return json.dumps(node, separators=(",", ":"), default=_json_default).encode()

    def to_connect_data(
        self, topic: str, data: bytes | None, headers: Headers | None = None
    ) -> SchemaAndValue:
        if data is None:
            return NULL_SCHEMA_AND_VALUE
        try:
            node = json.loads(data, parse_float=decimal.Decimal)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataException(
                f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}"
            ) from exc
        if self.schemas_enabled:
            if not (isinstance(node, dict) and set(node) == {"schema", "payload"}):
                raise DataException(_ENVELOPE_ERROR)
            schema = schema_from_json(node["schema"])
            return SchemaAndValue(schema, _value_from_json(schema, node["payload"]))
        return SchemaAndValue(None, _schemaless_from_json(node))


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        # json has no decimal type: emit the exact digits as a JSON number.
        return float(value) if value != value.to_integral_value() else int(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --- String / bytes --------------------------------------------------------------------


class StringConverter(Converter):
    """Kafka's ``org.apache.kafka.connect.storage.StringConverter``: any value is written
    as its string form; reads give an optional string schema."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("converter.encoding", ConfigType.STRING, "UTF8", None, Importance.HIGH,
                                  "The name of the Java character set to use for encoding strings.")  # fmt: skip

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        # Python's codec registry knows Java's charset names ("UTF8", "UTF-16", "ISO-8859-1").
        encoding = str(configs.get("converter.encoding") or "UTF8")
        codecs.lookup(encoding)
        self.encoding = encoding

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if value is None:
            return None
        return (value if isinstance(value, str) else _java_string(value)).encode(self.encoding)

    def to_connect_data(
        self, topic: str, data: bytes | None, headers: Headers | None = None
    ) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, data.decode(self.encoding))


def _java_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ByteArrayConverter(Converter):
    """Kafka's ``org.apache.kafka.connect.converters.ByteArrayConverter``."""

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise DataException(
                f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}"
            )
        return None if value is None else bytes(value)

    def to_connect_data(
        self, topic: str, data: bytes | None, headers: Headers | None = None
    ) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, data)


def configure_converter(
    converter: Converter, worker_or_connector_config: Mapping[str, Any], is_key: bool
) -> Converter:
    """Configure ``converter`` from a config that holds ``key.converter.*`` /
    ``value.converter.*`` settings (a worker or connector config)."""
    prefix = "key.converter." if is_key else "value.converter."
    settings = {
        k[len(prefix) :]: v for k, v in worker_or_connector_config.items() if k.startswith(prefix)
    }
    settings.setdefault("converter.type", "key" if is_key else "value")
    converter.configure(settings, is_key)
    return converter
