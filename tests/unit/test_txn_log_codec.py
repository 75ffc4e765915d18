from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncelog.coordinator.placement import java_abs, java_string_hashcode, partition_for
from oncelog.txn.log_codec import (
    TxnLogCodecError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    is_legacy_value,
)
from oncelog.txn.metadata import TransactionMetadata, TxnState

from ..legacy_layouts import legacy_txn_key, legacy_txn_value


def meta(**kw: object) -> TransactionMetadata:
    base: dict[str, object] = {
        "transactional_id": "txn-1",
        "producer_id": 42,
        "last_producer_id": 41,
        "producer_epoch": 7,
        "last_producer_epoch": 6,
        "txn_timeout_ms": 60_000,
        "state": TxnState.ONGOING,
        "partitions": {("orders", 0), ("orders", 3), ("__consumer_offsets", 17)},
        "txn_start_ms": 1_700_000_000_000,
        "txn_last_update_ms": 1_700_000_000_500,
    }
    base.update(kw)
    return TransactionMetadata(**base)  # type: ignore[arg-type]


# -- Java String.hashCode / Utils.abs (expected values computed with a real JVM) -----------


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("hello", 99162322),
        ("", 0),
        ("group-1", 293427299),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -2147483648),
        ("caf\u00e9", 3045921),
        ("\U0001f600", 1772899),  # one code point, two UTF-16 code units
        ("grp-\U0001f600-\u00e9\u4e2d", -1485927386),
        ("copier-0", -520220683),
    ],
)
def test_java_string_hashcode(s: str, expected: int) -> None:
    assert java_string_hashcode(s) == expected


def test_java_abs_and_partition_for() -> None:
    assert java_abs(-2147483648) == 0  # Math.abs would overflow; Kafka's Utils.abs gives 0
    assert java_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 22
    assert partition_for("group-1", 50) == 49
    assert partition_for("\U0001f600", 50) == 49
    assert partition_for("grp-\U0001f600-\u00e9\u4e2d", 50) == 36
    assert partition_for("my-txn-id", 50) == 11
    with pytest.raises(ValueError):
        partition_for("x", 0)


@given(st.text())
def test_hashcode_is_signed_int32(s: str) -> None:
    h = java_string_hashcode(s)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for(s, 50) < 50


# -- key/value codec ------------------------------------------------------------------------


@pytest.mark.parametrize("txn_id", ["txn-1", "", "ü-\U0001f600", "x" * 1000])
def test_key_round_trip(txn_id: str) -> None:
    raw = encode_key(txn_id)
    assert raw[:2] == b"\x00\x00"  # version first
    assert decode_key(raw) == txn_id


def test_key_errors() -> None:
    with pytest.raises(TxnLogCodecError):
        decode_key(b"\x00\x01\x00\x00")  # unknown version
    with pytest.raises(TxnLogCodecError):
        decode_key(b"\x00\x00\x00\x05ab")  # truncated
    with pytest.raises(TxnLogCodecError):
        decode_key(b"\x00")


@pytest.mark.parametrize(
    "m",
    [
        meta(),
        meta(state=TxnState.EMPTY, partitions=set(), txn_start_ms=-1, last_producer_epoch=-1),
        meta(state=TxnState.PREPARE_COMMIT),
        meta(state=TxnState.PREPARE_ABORT, producer_epoch=32767, last_producer_id=-1),
        meta(state=TxnState.COMPLETE_COMMIT, partitions=set()),
        meta(state=TxnState.COMPLETE_ABORT, partitions=set(), producer_id=2**62),
        meta(partitions={(f"topic-{i % 7}-é", i) for i in range(500)}),
    ],
)
def test_value_round_trip(m: TransactionMetadata) -> None:
    raw = encode_value(m)
    assert struct.unpack_from(">h", raw)[0] == 1  # version first: Kafka's flexible v1
    assert decode_value(m.transactional_id, raw) == m
    # The same metadata in oncelog's legacy layout still decodes.
    assert decode_value(m.transactional_id, legacy_txn_value(m)) == m


def test_value_encoding_is_deterministic() -> None:
    a = meta(partitions={("b", 2), ("a", 1), ("b", 1)})
    b = meta(partitions={("b", 1), ("b", 2), ("a", 1)})
    assert encode_value(a) == encode_value(b)


def test_value_errors() -> None:
    raw = encode_value(meta())
    with pytest.raises(TxnLogCodecError, match="version"):
        decode_value("t", b"\x00\x09" + raw[2:])
    with pytest.raises(TxnLogCodecError, match="trailing"):
        decode_value("t", raw + b"\x00")
    with pytest.raises(TxnLogCodecError):
        decode_value("t", raw[:-1])
    with pytest.raises(TxnLogCodecError):
        decode_value("t", raw[:10])
    bad_state = bytearray(raw)
    bad_state[2 + 8 + 2 + 4] = 99  # the state byte
    with pytest.raises(TxnLogCodecError, match="state"):
        decode_value("t", bytes(bad_state))
    legacy = bytearray(legacy_txn_value(meta()))
    legacy[2 + 8 + 8 + 2 + 2 + 4] = 99  # the legacy layout's state byte
    with pytest.raises(TxnLogCodecError):
        decode_value("t", bytes(legacy))
    with pytest.raises(TxnLogCodecError):
        decode_value("t", legacy_txn_value(meta())[:-1])


@given(
    pid=st.integers(0, 2**63 - 1),
    last_pid=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 32767),
    last_epoch=st.integers(-1, 32767),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from(list(TxnState)),
    parts=st.sets(
        st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)), max_size=30
    ),
    start=st.integers(-1, 2**62),
    update=st.integers(-1, 2**62),
)
def test_value_round_trip_property(
    pid: int,
    last_pid: int,
    epoch: int,
    last_epoch: int,
    timeout: int,
    state: TxnState,
    parts: set[tuple[str, int]],
    start: int,
    update: int,
) -> None:
    m = TransactionMetadata(
        "t", pid, last_pid, epoch, last_epoch, timeout, state, parts, start, update
    )
    assert decode_value("t", encode_value(m)) == m
    assert decode_value("t", legacy_txn_value(m)) == m


# -- Kafka's layout, byte for byte --------------------------------------------------------------


def test_key_golden() -> None:
    # transaction-coordinator/src/main/resources/common/message/TransactionLogKey.json:
    # version 0, string TransactionalId. oncelog's legacy key had the same bytes.
    assert encode_key("txn-1") == b"\x00\x00\x00\x05txn-1"
    assert encode_key("txn-1") == legacy_txn_key("txn-1")


def test_value_v1_golden() -> None:
    # TransactionLogValue.json v1 (flexible): int64 ProducerId, int16 ProducerEpoch, int32
    # TransactionTimeoutMs, int8 TransactionStatus (Kafka's ids: Ongoing = 1), compact
    # nullable array TransactionPartitions of {compact string Topic, compact array int32
    # PartitionIds, tagged fields}, int64 TransactionLastUpdateTimestampMs, int64
    # TransactionStartTimestampMs, then tagged fields: tag 0 PreviousProducerId (int64) and
    # oncelog's tag 10000 (uvarint 0x90 0x4e) for the last producer epoch (int16).
    m = meta(partitions={("t", 3), ("t", 0)}, txn_start_ms=1000, txn_last_update_ms=2000)
    raw = encode_value(m)
    assert raw == (
        b"\x00\x01"
        + struct.pack(">q", 42)
        + b"\x00\x07"
        + b"\x00\x00\xea\x60"
        + b"\x01"
        + b"\x02"  # one topic
        + b"\x02t"
        + b"\x03"  # two partitions
        + b"\x00\x00\x00\x00\x00\x00\x00\x03"
        + b"\x00"  # the topic's tagged fields
        + struct.pack(">q", 2000)
        + struct.pack(">q", 1000)
        + b"\x02"
        + b"\x00\x08"
        + struct.pack(">q", 41)
        + b"\x90\x4e\x02"
        + b"\x00\x06"
    )
    assert decode_value("txn-1", raw) == m


def test_empty_value_golden() -> None:
    # Kafka writes a null partition array for Empty, and leaves default tagged fields out.
    m = meta(
        state=TxnState.EMPTY,
        partitions=set(),
        last_producer_id=-1,
        last_producer_epoch=-1,
        txn_start_ms=-1,
        txn_last_update_ms=5,
    )
    raw = encode_value(m)
    assert raw == (
        b"\x00\x01"
        + struct.pack(">qhib", 42, 7, 60_000, 0)
        + b"\x00"
        + struct.pack(">qq", 5, -1)
        + b"\x00"
    )
    assert decode_value("txn-1", raw) == m


def test_kafka_v0_and_unknown_tags_decode() -> None:
    # TransactionLogValue.json v0 (what Kafka writes for transaction version 1): int32
    # array lengths, int16 string lengths, no tagged fields.
    raw = (
        struct.pack(">hqhib", 0, 42, 7, 60_000, 2)
        + struct.pack(">i", 1)
        + b"\x00\x01t"
        + struct.pack(">ii", 1, 4)
        + struct.pack(">qq", 2000, 1000)
    )
    assert decode_value("x", raw) == TransactionMetadata(
        "x", 42, -1, 7, -1, 60_000, TxnState.PREPARE_COMMIT, {("t", 4)}, 1000, 2000
    )
    assert not is_legacy_value(raw)
    assert not is_legacy_value(encode_value(meta()))
    assert is_legacy_value(legacy_txn_value(meta()))
    # Kafka's NextProducerId (1) and ClientTransactionVersion (2), as Kafka writes them
    # for a transaction version 2 client, and a tag unknown to both (7) that is skipped.
    m = meta(last_producer_epoch=-1)
    raw = encode_value(m)
    tail = struct.pack(">q", 41)
    assert raw.endswith(b"\x01\x00\x08" + tail)
    extended = (
        raw[: -len(tail) - 3]
        + b"\x04\x00\x08"
        + tail
        + b"\x01\x08"
        + struct.pack(">q", 43)
        + b"\x02\x02\x00\x02"
        + b"\x07\x01\xff"
    )
    assert decode_value("txn-1", extended) == dataclasses.replace(
        m, next_producer_id=43, client_transaction_version=2
    )
    assert encode_value(decode_value("txn-1", extended)) == extended[:-3].replace(
        b"\x04\x00\x08", b"\x03\x00\x08", 1
    )


# -- the struct-packed encoder against the field-by-field one it replaced -----------------------


def reference_encode_value(m: TransactionMetadata) -> bytes:
    """``encode_value`` as it was written with ``SchemaWriter``, one field at a time."""
    from oncelog.coordinator.schema_io import ONCELOG_TAG_BASE, SchemaWriter, pack_i16, pack_i64

    w = SchemaWriter(1)
    w.i64(m.producer_id)
    w.i16(m.producer_epoch)
    w.i32(m.txn_timeout_ms)
    w.i8(int(m.state))
    if m.state is TxnState.EMPTY and not m.partitions:
        w.compact_length(None)
    else:
        topics = sorted({t for t, _ in m.partitions})
        w.compact_length(len(topics))
        for topic in topics:
            w.compact_string(topic)
            parts = sorted(p for t, p in m.partitions if t == topic)
            w.compact_length(len(parts))
            for p in parts:
                w.i32(p)
            w.tagged({})
    w.i64(m.txn_last_update_ms)
    w.i64(m.txn_start_ms)
    tagged: dict[int, bytes] = {}
    if m.last_producer_id != -1:
        tagged[0] = pack_i64(m.last_producer_id)
    if m.next_producer_id != -1:
        tagged[1] = pack_i64(m.next_producer_id)
    if m.client_transaction_version != 0:
        tagged[2] = pack_i16(m.client_transaction_version)
    if m.next_producer_epoch != -1:
        tagged[3] = pack_i16(m.next_producer_epoch)
    if m.last_producer_epoch != -1:
        tagged[ONCELOG_TAG_BASE] = pack_i16(m.last_producer_epoch)
    w.tagged(tagged)
    return w.done()


@given(
    pid=st.integers(-1, 2**63 - 1),
    last_pid=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 32767),
    last_epoch=st.integers(-1, 32767),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from(list(TxnState)),
    parts=st.one_of(
        st.sets(st.tuples(st.text(max_size=200), st.integers(0, 2**31 - 1)), max_size=1),
        st.sets(st.tuples(st.sampled_from(["a", "b", "é", "x" * 130]), st.integers(0, 99))),
    ),
    times=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
    next_pid=st.integers(-1, 2**63 - 1),
    next_epoch=st.integers(-1, 32767),
    tv=st.integers(0, 2),
)
def test_value_encoding_equals_the_field_by_field_writer(
    pid: int,
    last_pid: int,
    epoch: int,
    last_epoch: int,
    timeout: int,
    state: TxnState,
    parts: set[tuple[str, int]],
    times: tuple[int, int],
    next_pid: int,
    next_epoch: int,
    tv: int,
) -> None:
    m = TransactionMetadata(
        "t",
        pid,
        last_pid,
        epoch,
        last_epoch,
        timeout,
        state,
        parts,
        times[0],
        times[1],
        next_producer_id=next_pid,
        next_producer_epoch=next_epoch,
        client_transaction_version=tv,
    )
    assert encode_value(m) == reference_encode_value(m)
