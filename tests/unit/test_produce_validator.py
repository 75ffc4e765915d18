"""storage.validator: each rejected produce batch carries Kafka's error code."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from oncelog.records.batch import OFFSET_ATTRIBUTES, OFFSET_MAGIC, compute_crc
from oncelog.records.builder import build_batch
from oncelog.records.compression import CompressionType
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import LogError
from oncelog.storage.validator import InvalidBatchError, validate_produce_batch

NOW = 1_700_000_000_000
V = 9  # produce version


def batch(n: int = 3, *, ts: int = NOW, **kwargs: object) -> bytearray:
    return bytearray(build_batch([(b"k", b"v" * 10, None, ts)] * n, **kwargs))  # type: ignore[arg-type]


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return buf


def code_of(records: bytes | bytearray | None, *, version: int = V, **cfg: object) -> ErrorCode:
    with pytest.raises(LogError) as info:
        validate_produce_batch(
            records, produce_version=version, config=LogConfig(**cfg), now_ms=NOW
        )  # type: ignore[arg-type]
    return info.value.error_code


def test_a_good_batch_returns_its_header() -> None:
    raw = batch(4, producer_id=7, producer_epoch=1, base_sequence=0)
    header = validate_produce_batch(raw, produce_version=V, config=LogConfig(), now_ms=NOW)
    assert (header.records_count, header.producer_id, header.base_sequence) == (4, 7, 0)
    assert header.size == len(raw)


@pytest.mark.parametrize("records", [None, b""])
def test_no_batch_is_invalid_record(records: bytes | None) -> None:
    assert code_of(records) == ErrorCode.invalid_record


def test_old_magic_is_invalid_record_even_with_a_bad_crc() -> None:
    raw = batch()
    raw[OFFSET_MAGIC] = 1
    assert code_of(raw) == ErrorCode.invalid_record


def test_bad_crc_and_bad_length_are_corrupt_message() -> None:
    raw = batch()
    raw[-1] ^= 0xFF
    assert code_of(raw) == ErrorCode.corrupt_message
    assert code_of(batch()[:-1]) == ErrorCode.corrupt_message
    assert code_of(batch()[:30]) == ErrorCode.corrupt_message


def test_two_batches_are_invalid_record() -> None:
    assert code_of(batch() + batch()) == ErrorCode.invalid_record


def test_control_batch_is_invalid_record() -> None:
    raw = batch(
        1, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True, control=True
    )
    assert code_of(raw) == ErrorCode.invalid_record


def test_record_count_must_match_the_offset_delta() -> None:
    raw = batch(3)
    struct.pack_into(">i", raw, 57, 2)
    assert code_of(recrc(raw)) == ErrorCode.invalid_record


def test_producer_id_without_sequence_is_invalid_record() -> None:
    assert (
        code_of(batch(producer_id=5, producer_epoch=0, base_sequence=-1))
        == ErrorCode.invalid_record
    )


def test_unknown_codec_is_corrupt_message() -> None:
    raw = batch()
    (attrs,) = struct.unpack_from(">h", raw, OFFSET_ATTRIBUTES)
    struct.pack_into(">h", raw, OFFSET_ATTRIBUTES, attrs | 0x07)
    assert code_of(recrc(raw)) == ErrorCode.corrupt_message


def test_zstd_needs_produce_v7() -> None:
    raw = batch(compression=CompressionType.ZSTD)
    assert code_of(raw, version=6) == ErrorCode.unsupported_compression_type
    header = validate_produce_batch(raw, produce_version=7, config=LogConfig(), now_ms=NOW)
    assert header.compression == CompressionType.ZSTD
    gzip = batch(compression=CompressionType.GZIP)
    assert (
        validate_produce_batch(gzip, produce_version=3, config=LogConfig(), now_ms=NOW).compression
        == 1
    )


def test_sizes_are_the_logs_rule_not_the_validators() -> None:
    """max.message.bytes and segment.bytes are checked once, by the log's append
    (test_storage_log), for client and coordinator batches alike."""
    raw = batch(10)
    cfg = LogConfig(max_message_bytes=len(raw), segment_bytes=len(raw))
    assert validate_produce_batch(raw, produce_version=V, config=cfg, now_ms=NOW).size == len(raw)


def test_create_time_bounds() -> None:
    cfg = {"message_timestamp_before_max_ms": 1000, "message_timestamp_after_max_ms": 500}
    assert code_of(batch(ts=NOW - 1001), **cfg) == ErrorCode.invalid_timestamp
    assert code_of(batch(ts=NOW + 501), **cfg) == ErrorCode.invalid_timestamp
    for ts in (NOW - 1000, NOW + 500, -1):
        validate_produce_batch(batch(ts=ts), produce_version=V, config=LogConfig(**cfg), now_ms=NOW)  # type: ignore[arg-type]
    # LogAppendTime topics overwrite timestamps, so any CreateTime passes.
    lat = LogConfig(message_timestamp_type="LogAppendTime", **cfg)  # type: ignore[arg-type]
    validate_produce_batch(batch(ts=0), produce_version=V, config=lat, now_ms=NOW)


def test_invalid_batch_error_is_a_log_error_with_its_code() -> None:
    exc = InvalidBatchError(ErrorCode.invalid_record, "nope")
    assert (
        isinstance(exc, LogError)
        and exc.error_code == ErrorCode.invalid_record
        and str(exc) == "nope"
    )


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_compacted_topics_refuse_keyless_records(codec: CompressionType) -> None:
    compact = LogConfig(cleanup_policy=("compact",))  # type: ignore[arg-type]
    keyed = bytearray(
        build_batch([(b"k", b"v", None, NOW), (b"j", None, None, NOW)], compression=codec)
    )
    validate_produce_batch(keyed, produce_version=V, config=compact, now_ms=NOW)
    keyless = bytearray(
        build_batch([(b"k", b"v", None, NOW), (None, b"v", None, NOW)], compression=codec)
    )
    assert code_of(keyless, cleanup_policy=("compact",)) == ErrorCode.invalid_record
    # A topic that only deletes takes keyless records, without decoding them.
    validate_produce_batch(keyless, produce_version=V, config=LogConfig(), now_ms=NOW)
