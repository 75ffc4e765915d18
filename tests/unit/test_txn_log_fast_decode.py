"""The fast ``__transaction_state`` decoders (``decode_key``, ``decode_value`` on v1)
against the strict schema reader: on valid records and random corruptions of them the
outcome (value, or exception type and message) is the same."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.coordinator.schema_io import SchemaWriter, uvarint
from oncelog.txn import log_codec
from oncelog.txn.log_codec import (
    decode_key,
    decode_key_schema,
    decode_value,
    encode_key,
    encode_value,
)
from oncelog.txn.metadata import TransactionMetadata, TxnState


def outcome(fn: object, *args: object) -> object:
    try:
        return ("ok", fn(*args))  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return ("raised", type(exc), str(exc))


metas = st.builds(
    TransactionMetadata,
    st.just("t"),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 32767),
    st.integers(-1, 32767),
    st.integers(1, 2**31 - 1),
    st.sampled_from(list(TxnState)),
    st.sets(
        st.tuples(st.text(min_size=1, max_size=140), st.integers(-(2**31), 2**31 - 1)), max_size=5
    ),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    next_producer_id=st.integers(-1, 2**63 - 1),
    next_producer_epoch=st.integers(-1, 32767),
    client_transaction_version=st.integers(0, 2),
)


@st.composite
def odd_values(draw: st.DrawFn) -> bytes:
    """v1 values encode_value never writes: topic entries with tagged fields, unknown or
    badly sized tags, multi-byte counts."""
    w = SchemaWriter(1)
    w.i64(draw(st.integers(-1, 100)))
    w.i16(draw(st.integers(-1, 5)))
    w.i32(draw(st.integers(1, 1000)))
    w.i8(draw(st.integers(-2, 9)))
    topics = draw(st.none() | st.lists(st.text(max_size=3), max_size=3))
    w.compact_length(None if topics is None else len(topics))
    for t in topics or []:
        w.compact_string(t)
        ids = draw(st.lists(st.integers(0, 9), max_size=3))
        w.compact_length(len(ids))
        for i in ids:
            w.i32(i)
        w.tagged(draw(st.dictionaries(st.integers(0, 3), st.binary(max_size=3), max_size=1)))
    w.i64(draw(st.integers(-1, 9)))
    w.i64(draw(st.integers(-1, 9)))
    w.tagged(
        draw(
            st.dictionaries(
                st.sampled_from([0, 1, 2, 3, 7, 200, 10_000, 20_000]),
                st.binary(max_size=9),
                max_size=4,
            )
        )
    )
    return w.done()


@st.composite
def corrupt(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    how = draw(st.sampled_from(["flip", "truncate", "extend", "utf8"]))
    if how == "flip" and buf:
        for _ in range(draw(st.integers(1, 3))):
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    elif how == "truncate":
        del buf[draw(st.integers(0, len(buf))) :]
    elif how == "extend":
        buf += draw(st.binary(min_size=1, max_size=4))
    elif how == "utf8" and len(buf) > 4:
        buf[draw(st.integers(2, len(buf) - 1))] = draw(st.sampled_from([0x80, 0xC3, 0xFF]))
    return bytes(buf)


def assert_same_value(data: bytes) -> None:
    assert outcome(decode_value, "t", data) == outcome(log_codec._decode_kafka_value, "t", data)


@settings(max_examples=300)
@given(metas)
def test_values_decode_the_same(m: TransactionMetadata) -> None:
    data = encode_value(m)
    fast = log_codec._fast_kafka_value_v1("t", data)
    if all(len(topic.encode()) < 127 for topic, _ in m.partitions):  # one-byte lengths
        assert fast == m  # the fast path takes what encode_value writes
    else:
        assert fast is None
    assert_same_value(data)


@settings(max_examples=500)
@given(odd_values())
def test_unusual_values_decode_the_same(data: bytes) -> None:
    assert_same_value(data)


@settings(max_examples=1500)
@given(st.data(), metas | odd_values())
def test_corrupted_values_fail_or_decode_the_same(
    data: st.DataObject, m: TransactionMetadata | bytes
) -> None:
    raw = encode_value(m) if isinstance(m, TransactionMetadata) else m
    corrupted = data.draw(corrupt(raw))
    if corrupted[:2] == b"\x00\x01":  # other versions never reach the fast path
        assert_same_value(corrupted)


@given(st.text(max_size=40) | st.binary(max_size=40))
def test_keys_decode_the_same(k: str | bytes) -> None:
    data = encode_key(k) if isinstance(k, str) else k
    assert outcome(decode_key, data) == outcome(decode_key_schema, data)
    if isinstance(k, str):
        assert decode_key(data) == k


def test_a_two_byte_tag_and_a_multibyte_topic_count() -> None:
    head = struct.pack(">hqhib", 1, 5, 1, 100, 0)
    value = head + b"\x00" + struct.pack(">qq", 1, 2) + b"\x01" + uvarint(10_000) + b"\x02\x00\x07"
    assert log_codec._fast_kafka_value_v1("t", value) is not None
    assert decode_value("t", value).last_producer_epoch == 7
