"""The fast ``__consumer_offsets`` decoder (``decode_record``) against the strict schema
reader (``decode_record_schema``): on valid records of every offset-commit layout and on
random corruptions of them, the outcome (value, or exception type and message) is the
same."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.coordinator.schema_io import SchemaWriter, uvarint
from oncelog.group.offsets_codec import (
    OffsetKey,
    OffsetValue,
    decode_record,
    decode_record_schema,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)

from ..legacy_layouts import legacy_offset_key, legacy_offset_value

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=30)


def outcome(fn: object, key: bytes, value: bytes | None) -> object:
    try:
        return ("ok", fn(key, value))  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return ("raised", type(exc), str(exc))


def assert_same(key: bytes, value: bytes | None) -> None:
    assert outcome(decode_record, key, value) == outcome(decode_record_schema, key, value)


@st.composite
def offset_values_any_version(draw: st.DrawFn) -> bytes:
    """An OffsetCommitValue of version 0-4 as Kafka lays it out (v4 with or without
    tagged fields)."""
    version = draw(st.integers(0, 4))
    w = SchemaWriter(version)
    w.i64(draw(i64))
    if version >= 3:
        w.i32(draw(i32))
    if version >= 4:
        w.compact_string(draw(st.text(max_size=200)))  # a 2-byte varint past 126 bytes
    else:
        w.string(draw(text))
    w.i64(draw(i64))
    if version == 1:
        w.i64(draw(i64))
    if version >= 4:
        tags = draw(st.dictionaries(st.integers(0, 20_000), st.binary(max_size=9), max_size=2))
        w.tagged(tags)
    return w.done()


keys = st.one_of(
    st.builds(encode_offset_key, text, text, i32),
    st.builds(
        lambda g, t, p: struct.pack(">h", 0) + encode_offset_key(g, t, p)[2:], text, text, i32
    ),
    st.builds(encode_group_key, text),
    st.builds(legacy_offset_key, text, text, i32),
)
values = st.one_of(
    st.none(),
    offset_values_any_version(),
    st.builds(
        encode_offset_value,
        st.builds(OffsetValue, i64, i32, text, i64, st.none() | st.integers(0, 2**63 - 1)),
    ),
    st.builds(
        legacy_offset_value,
        st.builds(OffsetValue, i64, i32, text, i64, st.none() | st.integers(0, 2**63 - 1)),
    ),
)


@settings(max_examples=500)
@given(keys, values)
def test_valid_records_decode_the_same(key: bytes, value: bytes | None) -> None:
    assert_same(key, value)


@st.composite
def corrupt(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few bytes flipped, cut short, extended, or an invalid UTF-8 byte."""
    how = draw(st.sampled_from(["flip", "truncate", "extend", "utf8", "length"]))
    buf = bytearray(data)
    if how == "flip" and buf:
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.integers(0, 255))
    elif how == "truncate":
        del buf[draw(st.integers(0, len(buf))) :]
    elif how == "extend":
        buf += draw(st.binary(min_size=1, max_size=4))
    elif how == "utf8" and len(buf) > 4:
        buf[draw(st.integers(4, len(buf) - 1))] = draw(st.sampled_from([0x80, 0xC3, 0xFF, 0xED]))
    elif how == "length" and len(buf) >= 4:
        i = draw(st.integers(2, len(buf) - 2))
        buf[i : i + 2] = struct.pack(">h", draw(st.integers(-3, 300)))
    return bytes(buf)


@settings(max_examples=1500)
@given(st.data(), keys, values, st.sampled_from(["key", "value", "both"]))
def test_corrupted_records_fail_or_decode_the_same(
    data: st.DataObject, key: bytes, value: bytes | None, which: str
) -> None:
    if which in ("key", "both"):
        key = data.draw(corrupt(key))
    if which in ("value", "both") and value is not None:
        value = data.draw(corrupt(value))
    assert_same(key, value)


@given(st.binary(max_size=60), st.none() | st.binary(max_size=60))
def test_random_bytes_decode_the_same(key: bytes, value: bytes | None) -> None:
    assert_same(key, value)


def test_the_common_layouts_take_the_fast_path() -> None:
    """The records the broker writes decode without the schema reader (a record the fast
    path declines would still decode right, only slowly: this pins the speed-up)."""
    from oncelog.group import offsets_codec

    key = encode_offset_key("g", "t", 3)
    assert offsets_codec._fast_offset_key(key) == OffsetKey("g", "t", 3)
    for v in (
        OffsetValue(5, 2, "meta", 1000),  # v3
        OffsetValue(5, -1, "", 1000, 2000),  # v1
        OffsetValue(5, 2, "m", 1000, 2000),  # v4 with oncelog's tagged expiry: slow path
    ):
        fast = offsets_codec._fast_offset_value(encode_offset_value(v))
        assert fast == (None if v.expire_timestamp_ms is not None and v.leader_epoch != -1 else v)
    v4_plain = SchemaWriter(4)
    v4_plain.i64(7)
    v4_plain.i32(1)
    v4_plain.buf += uvarint(2) + b"x"
    v4_plain.i64(9)
    v4_plain.tagged({})
    assert offsets_codec._fast_offset_value(v4_plain.done()) == OffsetValue(7, 1, "x", 9)
