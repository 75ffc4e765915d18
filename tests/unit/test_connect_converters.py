"""JsonConverter (with and without schemas), StringConverter and ByteArrayConverter,
checked against the JSON Kafka's JsonConverter writes (examples from its tests)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

from oncelog.connect.api.converters import (
    ByteArrayConverter,
    JsonConverter,
    StringConverter,
    configure_converter,
    schema_from_json,
    schema_to_json,
)
from oncelog.connect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Struct,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    timestamp_schema,
)
from oncelog.connect.api.errors import DataException


def _json(schemas: bool = True) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": "true" if schemas else "false"}, False)
    return converter


def test_primitive_envelope() -> None:
    out = _json().from_connect_data("t", BOOLEAN_SCHEMA, True)
    assert json.loads(out or b"") == {
        "schema": {"type": "boolean", "optional": False},
        "payload": True,
    }
    back = _json().to_connect_data("t", b'{"schema": {"type": "boolean"}, "payload": true}')
    assert back.schema == BOOLEAN_SCHEMA and back.value is True


def test_struct_envelope_round_trip() -> None:
    schema = struct_schema(
        [("field1", BOOLEAN_SCHEMA), ("field2", STRING_SCHEMA), ("field3", OPTIONAL_STRING_SCHEMA)]
    )
    value = Struct(schema).put("field1", True).put("field2", "string2").put("field3", None)
    out = json.loads(_json().from_connect_data("t", schema, value) or b"")
    assert out == {
        "schema": {
            "type": "struct",
            "fields": [
                {"type": "boolean", "optional": False, "field": "field1"},
                {"type": "string", "optional": False, "field": "field2"},
                {"type": "string", "optional": True, "field": "field3"},
            ],
            "optional": False,
        },
        "payload": {"field1": True, "field2": "string2", "field3": None},
    }
    back = _json().to_connect_data("t", json.dumps(out).encode())
    assert back.schema == schema
    assert back.value == value


def test_logical_types_use_kafkas_encodings() -> None:
    converter = _json()
    dec = json.loads(
        converter.from_connect_data("t", decimal_schema(2), decimal.Decimal("1.56")) or b""
    )
    assert dec == {
        "schema": {"type": "bytes", "optional": False, "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": {"scale": "2"}},
        "payload": "AJw=",
    }  # fmt: skip
    assert converter.to_connect_data("t", json.dumps(dec).encode()).value == decimal.Decimal("1.56")
    date = json.loads(
        converter.from_connect_data(
            "t", date_schema(), dt.date(1970, 1, 1) + dt.timedelta(days=10000)
        )
        or b""
    )
    assert date["payload"] == 10000
    assert date["schema"]["name"] == "org.apache.kafka.connect.data.Date"
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=2_000_000_000)
    ts = json.loads(converter.from_connect_data("t", timestamp_schema(), moment) or b"")
    assert ts["payload"] == 2_000_000_000
    assert converter.to_connect_data("t", json.dumps(ts).encode()).value == moment
    numeric = JsonConverter()
    numeric.configure({"decimal.format": "NUMERIC"}, False)
    assert (
        json.loads(
            numeric.from_connect_data("t", decimal_schema(2), decimal.Decimal("1.56")) or b""
        )["payload"]
        == 1.56
    )


def test_maps_arrays_and_bytes() -> None:
    converter = _json()
    string_keys = map_schema(STRING_SCHEMA, INT32_SCHEMA)
    assert json.loads(
        converter.from_connect_data("t", string_keys, {"key1": 12, "key2": 15}) or b""
    )["payload"] == {"key1": 12, "key2": 15}
    int_keys = map_schema(INT32_SCHEMA, INT32_SCHEMA)
    encoded = converter.from_connect_data("t", int_keys, {1: 12, 2: 15}) or b""
    assert json.loads(encoded)["payload"] == [[1, 12], [2, 15]]
    assert converter.to_connect_data("t", encoded).value == {1: 12, 2: 15}
    arr = array_schema(INT32_SCHEMA)
    assert json.loads(converter.from_connect_data("t", arr, [1, 2, 3]) or b"")["schema"] == {
        "type": "array", "items": {"type": "int32", "optional": False}, "optional": False,
    }  # fmt: skip
    assert (
        json.loads(converter.from_connect_data("t", BYTES_SCHEMA, b"test-string") or b"")["payload"]
        == "dGVzdC1zdHJpbmc="
    )


def test_tombstones_and_null_payloads() -> None:
    converter = _json()
    assert converter.from_connect_data("t", None, None) is None
    assert converter.to_connect_data("t", None).value is None
    with_schema = json.loads(converter.from_connect_data("t", OPTIONAL_STRING_SCHEMA, None) or b"")
    assert with_schema == {"schema": {"type": "string", "optional": True}, "payload": None}
    with pytest.raises(
        DataException, match="null value for field that is required and has no default value"
    ):
        converter.from_connect_data("t", STRING_SCHEMA, None)


def test_schemas_enabled_requires_envelope() -> None:
    with pytest.raises(DataException, match='requires "schema" and "payload" fields'):
        _json().to_connect_data("t", b'{"a": 1}')
    with pytest.raises(DataException, match="serialization error"):
        _json().to_connect_data("t", b"{not json")


def test_schemaless() -> None:
    converter = _json(schemas=False)
    assert (
        converter.from_connect_data("t", None, {"task": 1, "seqno": 7, "ok": True, "b": b"\x01"})
        == b'{"task":1,"seqno":7,"ok":true,"b":"AQ=="}'
    )
    back = converter.to_connect_data("t", b'{"a": 1, "b": [1.5, "x"], "c": null}')
    assert back.schema is None
    assert back.value == {"a": 1, "b": [1.5, "x"], "c": None}
    assert (
        converter.from_connect_data("t", INT64_SCHEMA, 5) == b"5"
    )  # schema present but not enveloped


def test_schema_json_round_trips_metadata() -> None:
    node = {
        "type": "int64",
        "optional": True,
        "name": "n",
        "version": 3,
        "doc": "d",
        "parameters": {"k": "v"},
        "default": 9,
    }
    schema = schema_from_json(node)
    assert schema is not None and schema.default == 9
    assert schema_to_json(schema) == node
    with pytest.raises(DataException, match="Unknown schema type: uuid"):
        schema_from_json({"type": "uuid"})


def test_configure_converter_takes_prefixed_keys() -> None:
    converter = configure_converter(
        JsonConverter(),
        {"value.converter.schemas.enable": "false", "key.converter.schemas.enable": "true"},
        is_key=False,
    )
    assert isinstance(converter, JsonConverter) and converter.schemas_enabled is False


def test_string_converter() -> None:
    converter = StringConverter()
    converter.configure({}, False)
    assert converter.from_connect_data("t", None, "héllo") == "héllo".encode()
    assert converter.from_connect_data("t", None, 12) == b"12"
    assert converter.from_connect_data("t", None, False) == b"false"
    assert converter.from_connect_data("t", None, None) is None
    back = converter.to_connect_data("t", "héllo".encode())
    assert back.schema == OPTIONAL_STRING_SCHEMA and back.value == "héllo"
    latin = StringConverter()
    latin.configure({"converter.encoding": "ISO-8859-1"}, False)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"


def test_byte_array_converter() -> None:
    converter = ByteArrayConverter()
    assert converter.from_connect_data("t", BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert converter.from_connect_data("t", None, None) is None
    assert converter.to_connect_data("t", b"x").schema == OPTIONAL_BYTES_SCHEMA
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: INT32"):
        converter.from_connect_data("t", INT32_SCHEMA, 1)
    with pytest.raises(DataException, match="not compatible with objects of type str"):
        converter.from_connect_data("t", None, "x")
