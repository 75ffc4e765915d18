"""Cross-implementation checks against kafka-python's v2 record code.

kafka-python needs python-snappy, lz4 and zstandard for those codecs; they are
test dependencies, so every codec is always checked.
"""

from __future__ import annotations

import io
from typing import Any

import kafka.codec as kafka_codec
import kafka.record.default_records as kafka_records
import kafka.record.util as kafka_util
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.records.batch import validate_batch
from oncelog.records.builder import build_batch, decode_batch
from oncelog.records.compression import CompressionType, compress, decompress
from oncelog.records.control import build_end_txn_marker
from oncelog.records.record import DecodedRecord
from oncelog.records.varint import decode_varlong, encode_varlong

AVAILABLE = {
    CompressionType.NONE: True,
    CompressionType.GZIP: kafka_codec.has_gzip(),
    CompressionType.SNAPPY: kafka_codec.has_snappy(),
    CompressionType.LZ4: kafka_codec.has_lz4(),
    CompressionType.ZSTD: kafka_codec.has_zstd(),
}
assert all(AVAILABLE.values()), f"codec libraries missing for kafka-python: {AVAILABLE}"
CODEC_PARAMS = list(AVAILABLE)
USABLE = [c for c, ok in AVAILABLE.items() if ok]

OPT_BYTES = st.none() | st.binary(max_size=200)
RECORDS = st.lists(
    st.tuples(
        OPT_BYTES,
        OPT_BYTES,
        st.lists(st.tuples(st.text(max_size=10), OPT_BYTES), max_size=3).map(tuple),
        st.integers(0, 2**45),
    ),
    min_size=1,
    max_size=15,
)
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=50)


def kafka_python_batch(records, codec: int, *, producer=(-1, -1, -1), transactional=False) -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 24,
    )
    for offset, (key, value, headers, ts) in enumerate(records):
        assert builder.append(offset, ts, key, value, list(headers)) is not None
    return bytes(builder.build())


def read_with_kafka_python(buf: bytes) -> tuple[Any, list[DecodedRecord]]:
    batch = kafka_records.DefaultRecordBatch(buf)
    assert batch.validate_crc()
    got = [DecodedRecord(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    return batch, got


def expected(records, base_offset: int = 0) -> list[DecodedRecord]:
    return [
        DecodedRecord(base_offset + i, ts, k, v, tuple(h))
        for i, (k, v, h, ts) in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODEC_PARAMS)
def test_we_read_kafka_python_batches(codec: int) -> None:
    records = [
        (b"key-%d" % i, b"value " * 50 + bytes([i]), (("trace", b"abc"), ("ünï", None)), 1_700_000_000_000 + i)
        for i in range(30)
    ] + [(None, None, (), 1_699_999_999_000)]  # fmt: skip
    buf = kafka_python_batch(records, codec, producer=(77, 2, 10), transactional=True)
    header, got = decode_batch(buf)
    assert header.compression == codec  # the payload really is compressed
    assert header.is_transactional and header.producer_id == 77 and header.base_sequence == 10
    assert got == expected(records)


@pytest.mark.parametrize("codec", CODEC_PARAMS)
def test_kafka_python_reads_our_batches(codec: int) -> None:
    records = [(b"k%d" % i, b"payload " * 40, (("h", b"v"),), 5_000 + 3 * i) for i in range(25)]
    buf = build_batch(
        records,
        base_offset=1234,
        compression=codec,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        partition_leader_epoch=4,
    )
    batch, got = read_with_kafka_python(buf)
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.leader_epoch, batch.records_count) == (1234, 4, 25)
    assert (batch.first_timestamp, batch.max_timestamp) == (5_000, 5_072)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 0)
    assert batch.last_offset_delta == 24
    assert got == expected(records, 1234)


@SLOW
@given(RECORDS, st.sampled_from(USABLE))
def test_random_batches_both_ways(records, codec: int) -> None:
    theirs = kafka_python_batch(records, codec)
    assert decode_batch(theirs)[1] == expected(records)
    ours = build_batch(records, compression=codec)
    assert read_with_kafka_python(ours)[1] == expected(records)
    # Identical uncompressed payloads: the record encodings agree byte for byte.
    if validate_batch(theirs).compression == 0:
        assert theirs[61:] == build_batch(records)[61:]


@pytest.mark.parametrize("commit", [True, False])
def test_kafka_python_reads_our_end_txn_marker(commit: bool) -> None:
    buf = build_end_txn_marker(5, 3, commit, 11, timestamp_ms=1_000, base_offset=50)
    batch, _ = read_with_kafka_python(buf)
    assert batch.is_control_batch and batch.is_transactional
    (rec,) = list(kafka_records.DefaultRecordBatch(buf))
    assert (rec.commit, rec.abort, rec.version, rec.offset) == (commit, not commit, 0, 50)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_matches_kafka_python(value: int) -> None:
    theirs = bytearray()
    kafka_util.encode_varint(value, theirs.append)
    assert encode_varlong(value) == bytes(theirs)
    assert decode_varlong(theirs) == kafka_util.decode_varint(theirs, 0)


def test_snappy_both_framings_from_kafka_python() -> None:
    data = b"0123456789abcdef" * 10_000
    for xerial in (True, False):
        assert decompress(2, kafka_codec.snappy_encode(data, xerial_compatible=xerial)) == data
    assert kafka_codec.snappy_decode(compress(2, data)) == data


def test_lz4_frame_variants() -> None:
    import lz4.frame

    data = bytes(range(256)) * 2_000
    for kwargs in (
        {"block_linked": False},  # what Java writes (64 KiB blocks)
        {"block_linked": False, "content_checksum": True, "store_size": True},
        {"block_linked": False, "block_checksum": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ):
        assert decompress(3, lz4.frame.compress(data, **kwargs)) == data
    assert lz4.frame.decompress(compress(3, data)) == data


def test_zstd_streamed_frame_without_content_size() -> None:
    import zstandard

    data = b"streamed " * 50_000
    sink = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(sink, closefd=False) as writer:
        writer.write(data)
    assert decompress(4, sink.getvalue()) == data
    assert kafka_codec.zstd_decode(compress(4, data)) == data
