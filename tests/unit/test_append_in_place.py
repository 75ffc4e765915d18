"""Offsets assigned in place in the received frame vs decode and re-encode (Hypothesis).

The produce path appends each partition's records as a writable view into the request
frame: the log writes the base offset (and, for LogAppendTime, the attribute bit, the
max timestamp and a new CRC) into those bytes and pwrites them. This must store exactly
what decoding the batch and encoding it again at its offset would, and touch nothing of
the frame outside the batch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.records.batch import validate_batch
from oncelog.records.builder import build_batch, decode_batch
from oncelog.records.compression import CompressionType
from oncelog.records.record import Record
from oncelog.storage.config import LOG_APPEND_TIME, LogConfig
from oncelog.storage.unified_log import UnifiedLog

NOW = 1_700_000_000_000
_B = st.binary(max_size=40)
RECORDS = st.lists(
    st.tuples(
        st.none() | _B,
        st.none() | _B,
        st.lists(st.tuples(st.text(max_size=5), st.none() | _B), max_size=2),
        st.integers(0, 5_000),
    ),
    min_size=1,
    max_size=8,
)


def reencoded(original: bytes, base_offset: int) -> bytes:
    """The straightforward path: decode every record, build the batch again."""
    header, records = decode_batch(original)
    return build_batch(
        [
            Record(
                r.offset - header.base_offset,
                r.timestamp - header.base_timestamp,
                r.key,
                r.value,
                tuple(r.headers),
            )
            for r in records
        ],
        base_offset=base_offset,
        base_timestamp=header.base_timestamp,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
    )


@settings(max_examples=150, deadline=None)
@given(
    RECORDS,
    st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD]),
    st.booleans(),
    st.integers(0, 3),
    st.binary(min_size=0, max_size=20),
    st.binary(min_size=0, max_size=20),
)
def test_in_place_append_equals_decode_and_reencode(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    compression: CompressionType,
    transactional: bool,
    earlier_batches: int,
    before: bytes,
    after: bytes,
) -> None:
    batch = build_batch(
        [(k, v, h, NOW + dt) for k, v, h, dt in records],
        compression=compression,
        producer_id=7 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
        transactional=transactional,
    )
    frame = bytearray(before + batch + after)  # the request frame around the records
    view = memoryview(frame)[len(before) : len(before) + len(batch)]
    with tempfile.TemporaryDirectory() as tmp:
        log = UnifiedLog.open(Path(tmp) / "t-0", LogConfig(), now_ms=NOW)
        filler = build_batch([(None, b"x", None, NOW)] * 2)
        for _ in range(earlier_batches):
            log.append(bytearray(filler), validate_batch(filler), now_ms=NOW)
        base = log.log_end_offset
        result = log.append(view, validate_batch(view), now_ms=NOW)
        written = log.read(base, 1 << 20)
        assert written is not None
        stored = written.read()
        log.close()
    assert result.base_offset == base
    assert stored == bytes(view)  # what was pwritten is the frame's own bytes
    assert stored == reencoded(batch, base)
    assert frame[: len(before)] == before and frame[len(before) + len(batch) :] == after


@settings(max_examples=100, deadline=None)
@given(RECORDS, st.integers(0, 3))
def test_in_place_log_append_time_equals_reencoding_with_the_append_time(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    earlier_batches: int,
) -> None:
    """LogAppendTime: the attribute bit, maxTimestamp = append time, and a fresh CRC."""
    batch = build_batch([(k, v, h, NOW + dt) for k, v, h, dt in records])
    frame = bytearray(b"head" + batch)
    view = memoryview(frame)[4:]
    append_time = NOW + 99_000
    with tempfile.TemporaryDirectory() as tmp:
        log = UnifiedLog.open(
            Path(tmp) / "t-0", LogConfig(message_timestamp_type=LOG_APPEND_TIME), now_ms=append_time
        )
        filler = build_batch([(None, b"x", None, NOW)])
        for _ in range(earlier_batches):
            log.append(bytearray(filler), validate_batch(filler), now_ms=append_time)
        base = log.log_end_offset
        result = log.append(view, validate_batch(view), now_ms=append_time)
        written = log.read(base, 1 << 20)
        assert written is not None
        stored = written.read()
        log.close()
    assert result.log_append_time == append_time
    header, decoded = decode_batch(stored)  # the CRC was recomputed
    assert header.is_log_append_time and header.max_timestamp == append_time
    assert [r.offset for r in decoded] == [base + i for i in range(len(records))]
    assert all(r.timestamp == append_time for r in decoded)
    # Against the straightforward path: the records re-encoded with the same timestamps,
    # the header built with the LogAppendTime bit and max timestamp.
    original_header, original = decode_batch(batch)
    expected = build_batch(
        [(r.key, r.value, list(r.headers), r.timestamp) for r in original],
        base_offset=base,
        log_append_time=True,
    )
    expected_header = validate_batch(expected)
    assert stored[:35] == expected[:17] + stored[17:21] + expected[21:35]  # up to maxTimestamp
    assert stored[43:] == expected[43:]
    assert expected_header.base_timestamp == original_header.base_timestamp
