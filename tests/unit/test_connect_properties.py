"""Property tests: the JSON converter round-trips any schema'd value, and committable
source offsets never run ahead of an unacknowledged record."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.connect.api.converters import JsonConverter
from oncelog.connect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaType,
    Struct,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    timestamp_schema,
)
from oncelog.connect.runtime.submitted_records import SubmittedRecords

PRIMITIVES = [INT8_SCHEMA, INT16_SCHEMA, INT32_SCHEMA, INT64_SCHEMA, FLOAT64_SCHEMA, BOOLEAN_SCHEMA, STRING_SCHEMA,
              BYTES_SCHEMA, decimal_schema(3), date_schema(), timestamp_schema()]  # fmt: skip
NAMES = st.text("abcdefgh_", min_size=1, max_size=6)


def schemas() -> st.SearchStrategy[Schema]:
    leaf = st.sampled_from(PRIMITIVES).flatmap(lambda s: st.sampled_from([s, s.as_optional()]))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            inner.map(array_schema),
            inner.map(lambda v: map_schema(STRING_SCHEMA, v)),
            inner.map(lambda v: map_schema(INT32_SCHEMA, v)),
            st.lists(st.tuples(NAMES, inner), min_size=1, max_size=4, unique_by=lambda f: f[0]).map(
                struct_schema
            ),
        ),
        max_leaves=8,
    )


def values(schema: Schema) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if schema.name == "org.apache.kafka.connect.data.Decimal":
        base = st.decimals(
            min_value=-(10**9), max_value=10**9, places=3, allow_nan=False, allow_infinity=False
        )
    elif schema.name == "org.apache.kafka.connect.data.Date":
        base = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1))
    elif schema.name == "org.apache.kafka.connect.data.Timestamp":
        base = st.integers(-(10**12), 10**13).map(
            lambda ms: dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
        )
    elif schema.type in (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
        bits = {
            SchemaType.INT8: 7,
            SchemaType.INT16: 15,
            SchemaType.INT32: 31,
            SchemaType.INT64: 63,
        }[schema.type]
        base = st.integers(-(2**bits), 2**bits - 1)
    elif schema.type is SchemaType.FLOAT64:
        base = st.floats(allow_nan=False, allow_infinity=False)
    elif schema.type is SchemaType.BOOLEAN:
        base = st.booleans()
    elif schema.type is SchemaType.STRING:
        base = st.text(max_size=10)
    elif schema.type is SchemaType.BYTES:
        base = st.binary(max_size=10)
    elif schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        base = st.lists(values(schema.value_schema), max_size=3)
    elif schema.type is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        base = st.dictionaries(
            values(schema.key_schema).filter(lambda k: k is not None),
            values(schema.value_schema),
            max_size=3,
        )
    else:
        base = st.fixed_dictionaries({f.name: values(f.schema) for f in schema.fields}).map(
            lambda d: _struct(schema, d)
        )
    return st.one_of(st.none(), base) if schema.optional else base


def _struct(schema: Schema, fields: dict[str, Any]) -> Struct:
    out = Struct(schema)
    for name, value in fields.items():
        out.put(name, value)
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_json_converter_round_trips_schema_and_value(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    value = data.draw(values(schema))
    converter = JsonConverter()
    converter.configure({}, False)
    encoded = converter.from_connect_data("t", schema, value)
    back = converter.to_connect_data("t", encoded)
    assert back.schema == schema
    assert back.value == value


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), min_size=1, max_size=40),
    st.randoms(),
)
def test_committable_offsets_never_skip_an_unacknowledged_record(
    plan: list[tuple[str, bool]], rnd: random.Random
) -> None:
    submitted = SubmittedRecords()
    handles = []
    for seq, (partition, _) in enumerate(plan):
        handles.append((partition, seq, submitted.submit({"p": partition}, {"seq": seq})))
    order = list(range(len(handles)))
    rnd.shuffle(order)
    acked: set[int] = set()
    committed: dict[str, int] = {}
    for i in order:
        partition, seq, handle = handles[i]
        if plan[i][1]:
            submitted.ack(handle)
            acked.add(seq)
        for key, offset in submitted.committable_offsets().offsets.items():
            p = dict(key)["p"]
            assert offset["seq"] > committed.get(p, -1)  # offsets only move forward
            committed[p] = offset["seq"]
    for partition in "abc":
        seqs = [seq for p, seq, _ in handles if p == partition]
        prefix = -1
        for seq in seqs:
            if seq not in acked:
                break
            prefix = seq
        # The committed offset is exactly the end of the acknowledged prefix.
        assert committed.get(partition, -1) == prefix
