from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.records.batch import (
    HEADER_SIZE,
    CorruptRecordError,
    InvalidRecordError,
    compute_crc,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)
from oncelog.records.builder import build_batch, decode_batch, iter_batches, iter_records
from oncelog.records.compression import (
    XERIAL_MAGIC,
    CompressionType,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from oncelog.records.control import (
    ControlRecordType,
    build_end_txn_marker,
    control_key,
    parse_control_record,
    read_marker,
)
from oncelog.records.record import DecodedRecord, Record
from oncelog.records.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    size_of_uvarint,
    size_of_varint,
    size_of_varlong,
)

CODECS = list(CompressionType)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
OPT_BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=20), OPT_BYTES), max_size=4).map(tuple)
RECORD_TUPLES = st.lists(
    st.tuples(OPT_BYTES, OPT_BYTES, HEADERS, st.integers(0, 2**45)), min_size=1, max_size=20
)
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def with_crc(batch: bytearray) -> bytes:
    """Re-seal a deliberately altered batch so only the structure is wrong."""
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def rebuild(header: bytes, payload: bytes, *, count: int | None = None) -> bytes:
    out = bytearray(header[:HEADER_SIZE] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    return with_crc(out)


# --- varints ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hexed"),
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)  # fmt: skip
def test_varint_known_vectors(value: int, hexed: str) -> None:
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed)) == (value, len(hexed) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (-(2**63), 10)


@given(INT32, st.binary(max_size=3))
def test_varint_roundtrip(value: int, tail: bytes) -> None:
    enc = encode_varint(value)
    assert len(enc) == size_of_varint(value)
    assert decode_varint(b"\xaa" + enc + tail, 1) == (value, 1 + len(enc))


@given(INT64)
def test_varlong_roundtrip(value: int) -> None:
    enc = encode_varlong(value)
    assert len(enc) == size_of_varlong(value)
    assert decode_varlong(memoryview(enc)) == (value, len(enc))


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value: int) -> None:
    enc = encode_uvarint(value)
    assert len(enc) == size_of_uvarint(value)
    assert decode_uvarint(bytearray(enc)) == (value, len(enc))


def test_varint_errors() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)
    with pytest.raises(ValueError):
        encode_uvarint(-1)
    for bad in (b"", b"\x80", b"\xff\xff"):
        with pytest.raises(CorruptRecordError):
            decode_varint(bad)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 5 + b"\x01")  # 6 bytes
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 10 + b"\x01")  # 11 bytes


# --- records ---------------------------------------------------------------


@given(INT32, INT64, OPT_BYTES, OPT_BYTES, HEADERS)
def test_record_roundtrip(offset_delta, timestamp_delta, key, value, headers) -> None:
    rec = Record(offset_delta, timestamp_delta, key, value, headers)
    enc = rec.encode()
    assert Record.decode(enc) == (rec, len(enc))
    assert Record.decode(b"xx" + enc + b"yy", 2) == (rec, 2 + len(enc))


def test_record_edge_values() -> None:
    big = bytes(range(256)) * 5000  # > 1 MB
    for rec in (
        Record(0, 0, None, None),
        Record(0, 0, b"", b""),
        Record(7, -5, big, big[:10], (("ключ-🔑", b""), ("", None), ("k", big))),
    ):
        assert Record.decode(rec.encode())[0] == rec
    # A null key is length -1 (zigzag 0x01); an empty one is length 0.
    assert Record(0, 0, None, b"").encode() == bytes.fromhex("0c000000010000")


def test_record_known_bytes() -> None:
    # Bytes from another implementation's test suite (ts delta 5, one header).
    enc = bytes([40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12])
    rec = Record(0, 5, b"\x01\x02\x03\x04", b"\x05\x06\x07", (("\x08\x09\x0a", b"\x0b\x0c"),))
    assert Record.decode(enc) == (rec, len(enc))
    assert rec.encode() == enc


def test_record_non_utf8_header_key_is_kept() -> None:
    body = bytes([0, 0, 0, 1, 1, 2, 4, 0xFF, 0xFE, 1])  # key b"\xff\xfe", null value
    enc = encode_varint(len(body)) + body
    rec, _ = Record.decode(enc)
    assert rec.encode() == enc


@pytest.mark.parametrize(
    "body",
    [
        b"",  # zero length
        bytes([0, 0, 0, 1, 1, 0]) + b"extra",  # bytes after the headers
        bytes([0, 0, 0, 20, 1, 2]),  # key longer than the record
        bytes([0, 0, 0, 1, 1, 1]),  # header count -1
        bytes([0, 0, 0, 1, 1, 2, 1, 1]),  # null header key
    ],
)
def test_record_malformed(body: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        Record.decode(encode_varint(len(body)) + body)
    with pytest.raises(CorruptRecordError):
        Record.decode(encode_varint(len(body) + 5) + body)  # length past the end


# --- compression -----------------------------------------------------------


@SLOW
@given(st.sampled_from(CODECS), st.binary(max_size=5000) | st.just(b"abc" * 40000))
def test_codec_roundtrip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, bytearray(data)))) == data


def test_snappy_is_xerial_framed_and_accepts_raw() -> None:
    import cramjam

    data = bytes(range(256)) * 600  # 150 KiB: several 32 KiB xerial blocks
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
    assert decompress(CompressionType.SNAPPY, framed) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data
    # snappy-java also reads streams that were concatenated
    assert decompress(CompressionType.SNAPPY, framed + framed) == data + data


def test_lz4_frame_has_independent_blocks() -> None:
    frame = compress(CompressionType.LZ4, b"x" * 200_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20  # version 1, block independence (Java requires it)


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize("garbage", [b"", b"\xff", b"not compressed at all" * 3])
def test_decompress_garbage(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_decompress_truncated(codec: int) -> None:
    data = compress(codec, bytes(range(256)) * 100)
    with pytest.raises(CorruptRecordError):
        decompress(codec, data[: len(data) - 5])


def test_unknown_codec() -> None:
    for codec in (5, 6, 7):
        with pytest.raises(UnsupportedCompressionError):
            compress(codec, b"x")
        with pytest.raises(UnsupportedCompressionError):
            decompress(codec, b"x")
    assert issubclass(UnsupportedCompressionError, CorruptRecordError)


# --- batches ---------------------------------------------------------------


def expected(records, base_offset: int) -> list[DecodedRecord]:
    return [
        DecodedRecord(base_offset + i, ts, k, v, tuple(h))
        for i, (k, v, h, ts) in enumerate(records)
    ]


@SLOW
@given(
    RECORD_TUPLES,
    st.sampled_from(CODECS),
    st.integers(0, 2**62),
    st.integers(-1, 2**31 - 1),
    st.booleans(),
)
def test_batch_roundtrip(records, codec, base_offset, epoch, transactional) -> None:
    pid, pepoch, seq = (42, 3, 2**31 - 5) if transactional else (-1, -1, -1)
    buf = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
        transactional=transactional,
        partition_leader_epoch=epoch,
    )
    header = validate_batch(buf)
    assert header.size == len(buf)
    assert header.compression == codec
    assert header.is_transactional == transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, pepoch, seq)
    assert header.partition_leader_epoch == epoch
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == records[0][3]  # Kafka: first record, not the minimum
    assert header.max_timestamp == max(r[3] for r in records)
    got_header, got = decode_batch(buf)
    assert got_header == header
    assert got == expected(records, base_offset)


def test_batch_from_record_objects_keeps_deltas() -> None:
    recs = [Record(0, 5, b"a", b"1"), Record(3, -2, None, b"2"), Record(9, 1, b"c", None)]
    buf = build_batch(recs, base_offset=100, base_timestamp=1_000, compression=CompressionType.ZSTD)
    header, got = decode_batch(buf)
    assert header.last_offset_delta == 9 and header.records_count == 3
    assert header.max_timestamp == 1_005
    assert [(r.offset, r.timestamp) for r in got] == [(100, 1_005), (103, 998), (109, 1_001)]
    with pytest.raises(ValueError):
        build_batch([Record(1, 0, None, None), Record(1, 0, None, None)])
    with pytest.raises(ValueError):
        build_batch([])


def test_log_append_time_overrides_record_timestamps() -> None:
    buf = bytearray(build_batch([(b"k", b"v", (), 10), (b"k", b"v", (), 20)]))
    set_log_append_time(buf, 0, len(buf), 999)
    header, got = decode_batch(buf)
    assert header.is_log_append_time
    assert [r.timestamp for r in got] == [999, 999]
    built = build_batch([(None, b"v", (), 555)], log_append_time=True)
    assert [r.timestamp for r in decode_batch(built)[1]] == [555]


def test_base_offset_rewrite_keeps_crc() -> None:
    buf = bytearray(build_batch([(b"k", b"v", (), 1)] * 3, compression=CompressionType.LZ4))
    set_base_offset(buf, 0, 1_000_000)
    _, got = decode_batch(buf)
    assert [r.offset for r in got] == [1_000_000, 1_000_001, 1_000_002]


@SLOW
@given(st.sampled_from(CODECS), st.data())
def test_crc_detects_any_flipped_byte(codec: int, data: st.DataObject) -> None:
    buf = build_batch(
        [(b"key", b"value" * 20, (("h", b"x"),), 1234), (None, None, (), 1300)], compression=codec
    )
    pos = data.draw(st.integers(17, len(buf) - 1), label="pos")  # crc field and all it covers
    flip = data.draw(st.integers(1, 255), label="xor")
    bad = bytearray(buf)
    bad[pos] ^= flip
    with pytest.raises(CorruptRecordError):
        validate_batch(bad)
    with pytest.raises(CorruptRecordError):
        decode_batch(bad)


def test_every_single_byte_flip_in_crc_region_is_detected() -> None:
    buf = build_batch([(b"key", b"value", (("h", None),), 1)], compression=CompressionType.GZIP)
    for pos in range(17, len(buf)):
        bad = bytearray(buf)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            validate_batch(bad)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_batch(codec: int) -> None:
    buf = build_batch([(b"k", b"v" * 100, (), 5), (b"k2", None, (), 6)], compression=codec)
    for cut in range(len(buf)):
        with pytest.raises(CorruptRecordError):
            decode_batch(buf[:cut])
        if cut:  # no bytes at all is an empty record set, not a truncated batch
            with pytest.raises(CorruptRecordError):
                list(iter_batches(buf[:cut], allow_partial=False))
            assert list(iter_batches(buf[:cut])) == []


@pytest.mark.parametrize("codec", CODECS)
def test_well_sealed_but_malformed_payload(codec: int) -> None:
    buf = build_batch([(b"k", b"v", (), 5), (b"k2", b"w", (), 6)], compression=codec)
    payload = decompress(codec, buf[HEADER_SIZE:])
    cases = [
        rebuild(buf, compress(codec, payload), count=3),  # fewer records than declared
        rebuild(buf, compress(codec, payload), count=1),  # bytes left over
        rebuild(buf, compress(codec, payload[:-1])),  # last record cut short
    ]
    if codec:
        cases.append(rebuild(buf, b"\x00garbage\x00" * 3))  # not a valid stream
    for bad in cases:
        validate_batch(bad)  # length and CRC are right
        with pytest.raises(CorruptRecordError):
            decode_batch(bad)


def test_unknown_codec_in_attributes() -> None:
    buf = bytearray(build_batch([(b"k", b"v", (), 5)]))
    struct.pack_into(">h", buf, 21, 5)
    with pytest.raises(UnsupportedCompressionError):
        decode_batch(with_crc(buf))


def test_unverified_decode_still_checks_structure() -> None:
    good = build_batch([(b"k", b"v", (), 5)], compression=CompressionType.GZIP)
    stale_crc = bytearray(good)
    stale_crc[17] ^= 0xFF
    assert decode_batch(stale_crc, verify=False)[1] == decode_batch(good)[1]
    old_magic = bytearray(good)
    old_magic[16] = 1
    for bad in (old_magic, good[:40], good[:-1]):
        with pytest.raises(CorruptRecordError):
            decode_batch(bad)
        with pytest.raises(CorruptRecordError):
            decode_batch(bad, verify=False)


def test_iter_over_consecutive_batches() -> None:
    a = build_batch([(b"a", b"1", (), 1), (b"b", b"2", (), 2)], base_offset=0)
    b = build_batch([(b"c", b"3", (), 3)], base_offset=2, compression=CompressionType.SNAPPY)
    c = build_end_txn_marker(1, 0, True, 0, timestamp_ms=4, base_offset=3)
    buf = a + b + c
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2, 3]
    assert [h.is_control for h, _ in iter_batches(buf)] == [False, False, True]
    # A fetch may end mid-batch: the partial tail is skipped unless asked not to.
    assert [r.offset for r in iter_records(buf + a[:30])] == [0, 1, 2, 3]
    assert [r.offset for r in iter_records(buf + a[:-1])] == [0, 1, 2, 3]
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf + a[:-1], allow_partial=False))
    commit_key = control_key(ControlRecordType.COMMIT)
    assert [r.key for r in iter_records(memoryview(buf), len(a))] == [b"c", commit_key]


def test_third_party_vectors() -> None:
    """Batches from another client's test suite: gzip, raw (unframed) snappy, lz4 frame."""
    cases = [  # (attributes, crc, compressed payload)
        (1, 0xE74ACEA5, "1f8b080000096e8800ff001500eaff28000a00080102030406050607020608090a040b0c"
                        "0300adc9586715000000"),
        (2, 0x15009F61, "155028000a00080102030406050607020608090a040b0c"),
        (3, 0xA94A77C5, "04224d186470b91500008028000a00080102030406050607020608090a040b0c"
                        "000000000c3bef92"),
    ]  # fmt: skip
    for attrs, crc, payload in cases:
        body = bytes.fromhex(payload)
        fields = (0, 49 + len(body), 0, 2, crc, attrs, 0, 1479847795000, 0, 0, 0, 0, 1)
        buf = struct.pack(">qiibIhiqqqhii", *fields) + body
        header, got = decode_batch(buf)
        assert header.compression == attrs
        assert got == [
            DecodedRecord(
                0, 1479847795005, b"\1\2\3\4", b"\5\6\7", (("\x08\x09\x0a", b"\x0b\x0c"),)
            )
        ]


# --- control records -------------------------------------------------------


@given(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**15 - 1),
    st.booleans(),
    INT32,
    st.integers(0, 2**50),
    st.integers(0, 2**60),
)
def test_end_txn_marker_roundtrip(pid, pepoch, commit, coord_epoch, ts, base_offset) -> None:
    buf = build_end_txn_marker(
        pid, pepoch, commit, coord_epoch, timestamp_ms=ts, base_offset=base_offset,
        partition_leader_epoch=7,
    )  # fmt: skip
    header = validate_batch(buf)
    assert header.is_control and header.is_transactional and header.compression == 0
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, pepoch, -1)
    assert header.base_offset == base_offset
    assert (header.records_count, header.last_offset_delta) == (1, 0)
    assert header.base_timestamp == header.max_timestamp == ts
    assert header.partition_leader_epoch == 7
    assert header.size == 78  # Kafka's fixed end-txn marker batch size
    assert read_marker(buf) == (commit, coord_epoch)
    (rec,) = decode_batch(buf)[1]
    assert rec.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert rec.value == struct.pack(">hi", 0, coord_epoch)
    parsed = parse_control_record(rec.key, rec.value)
    assert parsed.type == (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert parsed.coordinator_epoch == coord_epoch and parsed.is_end_txn_marker


def test_parse_control_record_rules() -> None:
    # Newer versions parse as version 0 and may carry extra bytes.
    rec = parse_control_record(struct.pack(">hh", 3, 1) + b"++", struct.pack(">hi", 2, 9) + b"++")
    assert rec.is_commit and rec.coordinator_epoch == 9
    other = parse_control_record(struct.pack(">hh", 0, 2), None)
    assert other.type == ControlRecordType.LEADER_CHANGE and other.coordinator_epoch is None
    unknown = parse_control_record(struct.pack(">hh", 0, 99), None)
    assert unknown.type == ControlRecordType.UNKNOWN and unknown.type_id == 99
    for key, value in [
        (None, None),
        (b"\x00\x00\x00", None),  # key too short
        (struct.pack(">hh", -1, 0), struct.pack(">hi", 0, 0)),  # negative key version
        (struct.pack(">hh", 0, 0), None),  # marker without value
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00"),  # value too short
        (struct.pack(">hh", 0, 1), struct.pack(">hi", -1, 0)),  # negative value version
    ]:
        with pytest.raises(InvalidRecordError):
            parse_control_record(key, value)


def test_read_marker_rejects_other_batches() -> None:
    with pytest.raises(InvalidRecordError):
        read_marker(build_batch([(b"k", b"v", (), 1)]))
    leader_change = build_batch(
        [(control_key(ControlRecordType.LEADER_CHANGE), b"", (), 1)], control=True
    )
    with pytest.raises(InvalidRecordError):
        read_marker(leader_change)
