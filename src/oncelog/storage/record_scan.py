"""Walk the records of one stored batch for their offsets and timestamps only.

ListOffsets needs the exact record (not just the batch) for a timestamp, so
the log decodes that one batch here: each record's length, timestampDelta and
offsetDelta are read and the rest skipped. Compressed batches are inflated
with the codec in ``records.compression``. The append path never comes here.
"""

from __future__ import annotations

from collections.abc import Iterator

from oncelog.records.batch import HEADER_SIZE, BatchHeader, CorruptRecordError
from oncelog.records.compression import decompress
from oncelog.records.varint import decode_varint, decode_varlong


def iter_record_times(batch: bytes, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record; LogAppendTime batches report maxTimestamp."""
    body = memoryview(batch)[HEADER_SIZE : header.size]
    data = decompress(header.compression, body) if header.compression else body
    fixed = header.max_timestamp if header.is_log_append_time else None
    pos, end = 0, len(data)
    for _ in range(header.records_count):
        if pos >= end:
            raise CorruptRecordError("batch has fewer records than it declares")
        length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 1 or record_end > end:
            raise CorruptRecordError("record length exceeds the batch")
        ts_delta, p = decode_varlong(data, pos + 1)  # skip the attributes byte
        offset_delta, _ = decode_varint(data, p)
        ts = fixed if fixed is not None else header.base_timestamp + ts_delta
        yield header.base_offset + offset_delta, ts
        pos = record_end


def first_record_at_or_after(
    batch: bytes, header: BatchHeader, timestamp: int, min_offset: int
) -> tuple[int, int] | None:
    """First record with timestamp >= ``timestamp`` and offset >= ``min_offset``.

    A batch that cannot be decoded answers with its base offset and maxTimestamp,
    the batch-granular answer Kafka gave before it searched inside batches.
    """
    try:
        for offset, ts in iter_record_times(batch, header):
            if ts >= timestamp and offset >= min_offset:
                return offset, ts
    except CorruptRecordError:
        return max(header.base_offset, min_offset), header.max_timestamp
    return None


def first_record_with_timestamp(batch: bytes, header: BatchHeader, timestamp: int) -> int:
    """Offset of the first record carrying exactly ``timestamp`` (the batch max)."""
    try:
        for offset, ts in iter_record_times(batch, header):
            if ts == timestamp:
                return offset
    except CorruptRecordError:
        pass
    return header.last_offset  # Kafka's pre-3.8 "shallow" offset of the max timestamp
