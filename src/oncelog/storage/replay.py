"""Read a whole partition back, for coordinators rebuilding state on start."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from oncelog.records.builder import iter_batches
from oncelog.records.control import parse_control_record
from oncelog.storage.log import PartitionLog

READ_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    # For end-txn markers: True = COMMIT, False = ABORT; None for data records.
    marker_commit: bool | None = None


def iter_log(part: PartitionLog) -> Iterator[LogEntry]:
    """Every record and end-txn marker from the log start to the high watermark."""
    offset = part.log_start_offset
    end = part.high_watermark
    while offset < end:
        chunk = part.read(offset, READ_CHUNK, max_offset=end, min_one=True)
        if chunk is None:
            return
        data = chunk.read()
        last = offset
        for header, records in iter_batches(data, verify=False):
            last = header.next_offset
            if header.is_control:
                for rec in records:
                    marker = parse_control_record(rec.key, rec.value)
                    if marker.coordinator_epoch is not None:
                        yield LogEntry(
                            rec.offset, None, None, header.producer_id, True, marker.is_commit
                        )
                continue
            for rec in records:
                if rec.offset >= offset:
                    yield LogEntry(
                        rec.offset, rec.key, rec.value, header.producer_id, header.is_transactional
                    )
        if last <= offset:
            return
        offset = last
