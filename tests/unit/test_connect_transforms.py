"""The built-in transforms and predicates, and the chain built from Kafka's config keys.
Expected outcomes follow Kafka's documented behaviour for each transform."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from oncelog.connect.api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_NAME,
    Struct,
    struct_schema,
)
from oncelog.connect.api.errors import ConfigException, DataException
from oncelog.connect.api.records import Headers, SinkRecord, SourceRecord
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.transformation_chain import build_chain
from oncelog.connect.transforms import (
    ExtractFieldKey,
    ExtractFieldValue,
    HasHeaderKey,
    InsertFieldValue,
    RecordIsTombstone,
    RegexRouter,
    ReplaceFieldValue,
    TimestampRouter,
    TopicNameMatches,
    ValueToKey,
)
from oncelog.connect.transforms.routers import format_simple_date, java_replacement

VALUE_SCHEMA = struct_schema(
    [("id", INT32_SCHEMA), ("name", STRING_SCHEMA), ("age", OPTIONAL_INT32_SCHEMA)], name="person"
)


def _person(id_: int = 1, name: str = "ann", age: int | None = 30) -> Struct:
    return Struct(VALUE_SCHEMA).put("id", id_).put("name", name).put("age", age)


def _sink(value: Any, schema: Any = None, **kw: Any) -> SinkRecord:
    return SinkRecord.create(
        "orders",
        2,
        42,
        value,
        value_schema=schema,
        timestamp=kw.pop("timestamp", 1_600_000_000_000),
        **kw,
    )


def _configured(cls: type, **config: str) -> Any:
    t = cls()
    t.configure(config)
    return t


def test_insert_field_schemaless() -> None:
    t = _configured(
        InsertFieldValue,
        **{
            "topic.field": "t",
            "partition.field": "p",
            "offset.field": "o!",
            "timestamp.field": "ts",
            "static.field": "src",
            "static.value": "db1",
        },
    )
    out = t.apply(_sink({"a": 1}))
    assert out.value == {
        "a": 1,
        "t": "orders",
        "p": 2,
        "o": 42,
        "ts": 1_600_000_000_000,
        "src": "db1",
    }


def test_insert_field_with_schema_builds_the_new_schema() -> None:
    t = _configured(
        InsertFieldValue,
        **{"topic.field": "topic!", "offset.field": "offset", "timestamp.field": "ts"},
    )
    out = t.apply(_sink(_person(), VALUE_SCHEMA))
    fields = [
        (f.name, f.schema.type.value, f.schema.optional, f.schema.name)
        for f in out.value_schema.fields
    ]
    assert fields == [
        ("id", "int32", False, None),
        ("name", "string", False, None),
        ("age", "int32", True, None),
        ("topic", "string", False, None),
        ("offset", "int64", True, None),
        ("ts", "int64", True, TIMESTAMP_NAME),
    ]
    assert out.value_schema.name == "person"
    assert out.value.get("topic") == "orders" and out.value.get("offset") == 42
    assert out.value.get("ts") == dt.datetime(2020, 9, 13, 12, 26, 40, tzinfo=dt.UTC)


def test_insert_field_edge_cases() -> None:
    t = _configured(InsertFieldValue, **{"offset.field": "o"})
    tombstone = _sink(None)
    assert t.apply(tombstone) is tombstone
    source = SourceRecord.create({"p": 1}, {"o": 1}, "orders", {"a": 1})
    with pytest.raises(
        DataException,
        match=r"Only SinkRecord supported for \[field insertion\], found: SourceRecord",
    ):
        t.apply(source)
    with pytest.raises(
        DataException,
        match=r"Only Map objects supported in absence of schema for \[field insertion\], found: str",
    ):
        t.apply(_sink("text"))
    with pytest.raises(DataException, match="No field insertion configured"):
        _configured(InsertFieldValue)


def test_replace_field() -> None:
    t = _configured(ReplaceFieldValue, exclude="age", renames="name:full_name,id:pk")
    assert t.apply(_sink({"id": 1, "name": "ann", "age": 3, "x": 0})).value == {
        "pk": 1,
        "full_name": "ann",
        "x": 0,
    }
    out = t.apply(_sink(_person(), VALUE_SCHEMA))
    assert [f.name for f in out.value_schema.fields] == ["pk", "full_name"]
    assert out.value.to_dict() == {"pk": 1, "full_name": "ann"}
    only = _configured(ReplaceFieldValue, include="name,age", exclude="age")
    assert only.apply(_sink({"id": 1, "name": "ann", "age": 3})).value == {"name": "ann"}
    legacy = _configured(ReplaceFieldValue, blacklist="id")
    assert legacy.apply(_sink({"id": 1, "name": "x"})).value == {"name": "x"}
    with pytest.raises(ConfigException, match="Invalid rename mapping: bad"):
        _configured(ReplaceFieldValue, renames="bad")


def test_value_to_key() -> None:
    t = _configured(ValueToKey, fields="id,name")
    assert t.apply(_sink({"id": 1, "name": "ann", "age": 3})).key == {"id": 1, "name": "ann"}
    out = t.apply(_sink(_person(7, "bo"), VALUE_SCHEMA))
    assert [f.name for f in out.key_schema.fields] == ["id", "name"]
    assert out.key.to_dict() == {"id": 7, "name": "bo"}
    assert out.value == _person(7, "bo")
    with pytest.raises(DataException, match="Field does not exist: nope"):
        _configured(ValueToKey, fields="nope").apply(_sink(_person(), VALUE_SCHEMA))
    with pytest.raises(ConfigException, match='Missing required configuration "fields"'):
        _configured(ValueToKey)


def test_extract_field() -> None:
    value = _configured(ExtractFieldValue, field="name")
    assert value.apply(_sink({"name": "ann"})).value == "ann"
    assert value.apply(_sink({"other": 1})).value is None
    assert value.apply(_sink(None)).value is None
    out = value.apply(_sink(_person(), VALUE_SCHEMA))
    assert out.value == "ann" and out.value_schema == STRING_SCHEMA
    with pytest.raises(DataException, match="Unknown field: nope"):
        _configured(ExtractFieldValue, field="nope").apply(_sink(_person(), VALUE_SCHEMA))
    key = _configured(ExtractFieldKey, field="id")
    assert key.apply(_sink("v", key={"id": 5})).key == 5


def test_regex_router_uses_java_replacement_syntax() -> None:
    t = _configured(RegexRouter, regex="(?<name>.*)-(\\d+)", replacement="$2_${name}_x")
    assert t.apply(_sink({}, None).new_record(topic="orders-7")).topic == "7_orders_x"
    assert t.apply(_sink({})).topic == "orders"  # no full match: unchanged
    dollar = _configured(RegexRouter, regex="a(b)", replacement="\\$1-$1")
    assert dollar.apply(_sink({}).new_record(topic="ab")).topic == "$1-b"
    with pytest.raises(
        ConfigException, match="Invalid value \\( for configuration regex: Invalid regex"
    ):
        _configured(RegexRouter, regex="(", replacement="x")


def test_java_replacement_group_digits() -> None:
    import re

    match = re.fullmatch("(a)(b)", "ab")
    assert match is not None
    # Group 12 does not exist, so "$12" is group 1 followed by "2", as in Java.
    assert java_replacement(match, "$12") == "a2"


def test_timestamp_router() -> None:
    t = _configured(TimestampRouter)
    assert t.apply(_sink({}, timestamp=1_600_000_000_000)).topic == "orders-20200913"
    custom = _configured(
        TimestampRouter,
        **{"topic.format": "${timestamp}_${topic}", "timestamp.format": "yyyy-MM-dd'T'HH:mm"},
    )
    assert custom.apply(_sink({}, timestamp=1_600_000_000_000)).topic == "2020-09-13T12:26_orders"
    with pytest.raises(DataException, match="Timestamp missing on record"):
        t.apply(_sink({}, timestamp=None))
    with pytest.raises(ConfigException, match="Illegal pattern character 'q'"):
        _configured(TimestampRouter, **{"timestamp.format": "yyyyq"})
    assert (
        format_simple_date("yy.M.d h a SSS", dt.datetime(2021, 3, 4, 15, 6, 7, 89000))
        == "21.3.4 3 PM 089"
    )


def test_predicates() -> None:
    matches = TopicNameMatches()
    matches.configure({"pattern": "ord.*"})
    assert matches.test(_sink({})) and not matches.test(_sink({}).new_record(topic="xorders"))
    has = HasHeaderKey()
    has.configure({"name": "trace"})
    assert has.test(_sink({}, headers=Headers.of([("trace", b"1")])))
    assert not has.test(_sink({}))
    assert RecordIsTombstone().test(_sink(None)) and not RecordIsTombstone().test(_sink({}))
    with pytest.raises(ConfigException, match="String must be non-empty"):
        HasHeaderKey().configure({"name": " "})


def test_chain_from_connector_config() -> None:
    config = {
        "transforms": "dropTombstones,route,addTopic",
        "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "orders",
        "transforms.route.replacement": "orders-v2",
        "transforms.route.predicate": "fromOrders",
        "transforms.addTopic.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.addTopic.topic.field": "topic",
        "transforms.addTopic.predicate": "isTombstone",
        "transforms.addTopic.negate": "true",
        "predicates": "isTombstone,fromOrders",
        "predicates.isTombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "predicates.fromOrders.type": "TopicNameMatches",
        "predicates.fromOrders.pattern": "orders",
    }
    chain = build_chain(config, PluginRegistry.with_builtins())
    assert [s.alias for s in chain.stages] == ["dropTombstones", "route", "addTopic"]
    assert chain.apply(_sink(None)) is None
    out = chain.apply(_sink({"a": 1}))
    assert (
        out is not None and out.topic == "orders-v2" and out.value == {"a": 1, "topic": "orders-v2"}
    )
    other = chain.apply(_sink({"a": 1}).new_record(topic="payments"))
    assert (
        other is not None
        and other.topic == "payments"
        and other.value == {"a": 1, "topic": "payments"}
    )
    chain.close()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"transforms": "a"},
            'Missing required configuration "transforms.a.type" which has no default value.',
        ),
        (
            {"transforms": "a,a"},
            "Invalid value a,a for configuration transforms: Duplicate alias provided.",
        ),
        (
            {"transforms": "a", "transforms.a.type": "NoSuchTransform"},
            "Invalid value NoSuchTransform for configuration transforms.a.type: Class NoSuchTransform could not be found.",
        ),
        (
            {"transforms": "a", "transforms.a.type": "JsonConverter"},
            "Invalid value JsonConverter for configuration transforms.a.type: Class oncelog.connect.api.converters.JsonConverter is not a Transformation",
        ),
        (
            {"transforms": "a", "transforms.a.type": "RegexRouter", "transforms.a.regex": "x"},
            'Missing required configuration "transforms.a.replacement" which has no default value.',
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
            "Invalid value p for configuration transforms.a.predicate: Predicate alias p is not defined in 'predicates'",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "maybe"},
            "Invalid value maybe for configuration transforms.a.negate: Expected value to be either true or false",
        ),
        (
            {"predicates": "p", "predicates.p.type": "TopicNameMatches"},
            'Missing required configuration "predicates.p.pattern" which has no default value.',
        ),
    ],
)
def test_chain_errors_name_the_key(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigException) as err:
        build_chain(config, PluginRegistry.with_builtins())
    assert str(err.value) == message


def test_record_types_keep_original_coordinates() -> None:
    record = _sink({"a": 1}).new_record(topic="renamed", kafka_partition=0)
    assert (
        record.original_topic == "orders"
        and record.original_kafka_partition == 2
        and record.original_kafka_offset == 42
    )
    assert INT64_SCHEMA != OPTIONAL_INT64_SCHEMA and OPTIONAL_STRING_SCHEMA.optional
