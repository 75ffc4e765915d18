"""Read a whole partition back, for coordinators rebuilding state on start."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from oncelog.records.builder import iter_batches_kv
from oncelog.records.control import parse_control_record

if TYPE_CHECKING:
    from oncelog.storage.unified_log import UnifiedLog

READ_CHUNK = 4 * 1024 * 1024


class LogEntry(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    # For end-txn markers: True = COMMIT, False = ABORT; None for data records.
    marker_commit: bool | None = None


class LogBatch(NamedTuple):
    """One batch as a loader needs it: a data batch's ``(offset, key, value)`` records,
    or (``marker_commit`` not None) an end-txn marker of ``producer_id`` (one entry:
    its offset)."""

    producer_id: int
    transactional: bool
    marker_commit: bool | None
    records: list[tuple[int, bytes | None, bytes | None]]


def iter_log_batches(
    part: UnifiedLog, start: int | None = None, end: int | None = None
) -> Iterator[LogBatch]:
    """Every data batch and end-txn marker from ``start`` (default: the log start) to
    ``end`` (default: the high watermark when called). Records below ``start`` in the
    first batch are left out; so are control records other than end-txn markers."""
    offset = part.log_start_offset if start is None else max(start, part.log_start_offset)
    if end is None:
        end = part.high_watermark
    while offset < end:
        chunk = part.read(offset, READ_CHUNK, max_offset=end, min_one=True)
        if chunk is None:
            return
        data = chunk.read()
        last = offset
        for header, records in iter_batches_kv(data):
            last = header.next_offset
            if header.is_control:
                for rec_offset, key, value in records:
                    marker = parse_control_record(key, value)
                    if marker.coordinator_epoch is not None:
                        # A marker's one entry carries only its offset.
                        marker_at: list[tuple[int, bytes | None, bytes | None]]
                        marker_at = [(rec_offset, None, None)]
                        yield LogBatch(header.producer_id, True, marker.is_commit, marker_at)
                continue
            if records and records[0][0] < offset:
                records = [r for r in records if r[0] >= offset]
            yield LogBatch(header.producer_id, header.is_transactional, None, records)
        if last <= offset:
            return
        offset = last


def iter_log(part: UnifiedLog) -> Iterator[LogEntry]:
    """Every record and end-txn marker from the log start to the high watermark."""
    return log_entries(iter_log_batches(part))


def log_entries(batches: Iterable[LogBatch]) -> Iterator[LogEntry]:
    """The records and end-txn markers of ``batches``, one by one."""
    for batch in batches:
        pid = batch.producer_id
        if batch.marker_commit is not None:
            (marker_offset, _, _) = batch.records[0]
            yield LogEntry(marker_offset, None, None, pid, True, batch.marker_commit)
            continue
        for rec_offset, key, value in batch.records:
            yield LogEntry(rec_offset, key, value, pid, batch.transactional)
