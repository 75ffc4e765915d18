from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.storage.checkpoint import LOG_START_FILE, list_snapshots, read_log_start
from oncelog.storage.unified_log import OffsetOutOfRangeError, UnifiedLog

from .test_storage_support import (
    NOW,
    append,
    config,
    make_batch,
    open_log,
    read_all,
    read_offsets,
)

HOUR = 3_600_000


def build(tmp_path: Path, **props: object) -> UnifiedLog:
    """Six segments of 3 batches (9 offsets); segment k's records are stamped NOW + k hours."""
    log = open_log(tmp_path / "t-0", config(segment_bytes=400, **props))
    for k in range(6):
        for j in range(3):
            append(log, 3, ts=NOW + k * HOUR + j, tag=j)
    assert [s.base_offset for s in log.segments] == [0, 9, 18, 27, 36, 45]
    return log


def test_retention_by_time(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=2 * HOUR, file_delete_delay_ms=0)
    assert log.apply_retention(NOW + 2 * HOUR) == 0
    # segment k's largest timestamp is NOW + k*HOUR + 2
    assert log.apply_retention(NOW + 3 * HOUR + 3) == 2
    assert [s.base_offset for s in log.segments] == [18, 27, 36, 45]
    assert log.log_start_offset == 18
    assert read_log_start(tmp_path / "t-0") == 18
    assert read_all(log) == list(range(18, 54))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(17, 100)


def test_time_retention_expires_the_active_segment_too(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=HOUR)
    assert log.apply_retention(NOW + 100 * HOUR) == 6
    assert [s.base_offset for s in log.segments] == [54]  # rolled a fresh empty segment
    assert (log.log_start_offset, log.log_end_offset) == (54, 54)
    assert log.read(54, 100) is None
    assert append(log, ts=NOW + 100 * HOUR).base_offset == 54
    assert log.apply_retention(NOW + 100 * HOUR) == 0  # active and not expired


def test_infinite_retention_and_compact_policy(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=-1)
    assert log.apply_retention(NOW + 10**6 * HOUR) == 0
    log.update_config(config(segment_bytes=400, retention_ms=1, cleanup_policy="compact"))
    assert log.apply_retention(NOW + 10**6 * HOUR) == 0
    log.update_config(config(segment_bytes=400, retention_ms=1, cleanup_policy="compact,delete"))
    assert log.apply_retention(NOW + 10**6 * HOUR) == 6


def test_retention_by_size(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=-1)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    # Kafka deletes a segment only if what remains is still at least retention.bytes.
    log.update_config(config(segment_bytes=400, retention_ms=-1, retention_bytes=total - 1))
    assert log.apply_retention(NOW) == 0
    log.update_config(config(segment_bytes=400, retention_ms=-1, retention_bytes=total - sizes[0]))
    assert log.apply_retention(NOW) == 1
    log.update_config(config(segment_bytes=400, retention_ms=-1, retention_bytes=sum(sizes[3:])))
    assert log.apply_retention(NOW) == 2
    assert log.size_bytes() == sum(sizes[3:])
    assert log.log_start_offset == 27
    log.update_config(config(segment_bytes=400, retention_ms=-1, retention_bytes=0))
    assert log.apply_retention(NOW) == 3
    assert log.size_bytes() == 0 and log.log_start_offset == log.log_end_offset == 54


def test_deleted_files_linger_for_file_delete_delay(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=HOUR, file_delete_delay_ms=60_000)
    sl = log.read(0, 1 << 20)
    assert sl is not None
    before = sl.read()
    assert log.apply_retention(NOW + 3 * HOUR) == 2
    d = tmp_path / "t-0"
    assert not (d / "00000000000000000000.log").exists()
    assert (d / "00000000000000000000.log.deleted").exists()
    assert sl.read() == before  # a slice handed out before the delete still reads
    log.maybe_flush(NOW + 3 * HOUR + 59_999)
    assert (d / "00000000000000000000.log.deleted").exists()
    log.maybe_flush(NOW + 3 * HOUR + 60_000)
    assert not list(d.glob("*.deleted"))


def test_delete_records_before(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=-1)
    assert log.delete_records_before(5) == 5
    assert [s.base_offset for s in log.segments][0] == 0  # inside the first segment
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert read_all(log)[0] in (3, 5)  # the batch holding 5 starts at 3
    assert log.delete_records_before(3) == 5  # never moves back
    assert log.delete_records_before(20) == 20
    assert [s.base_offset for s in log.segments] == [18, 27, 36, 45]
    assert log.offset_for_timestamp(0) == (20, NOW + 2 * HOUR + 0)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(55)
    assert log.delete_records_before(-1) == 54  # -1: up to the high watermark
    assert [s.base_offset for s in log.segments] == [45]  # never the active segment
    assert log.read(54, 100) is None


def test_log_start_survives_restart(tmp_path: Path) -> None:
    log = build(tmp_path, retention_ms=-1)
    log.delete_records_before(22)
    log.close()
    assert (tmp_path / "t-0" / LOG_START_FILE).exists()
    log = open_log(tmp_path / "t-0", config(segment_bytes=400))
    assert log.log_start_offset == 22
    assert read_offsets(log, 22)[0] == 21  # the batch 21..23
    # and after a crash
    log.delete_records_before(40)
    log = open_log(tmp_path / "t-0", config(segment_bytes=400))
    assert log.log_start_offset == 40


def test_log_start_beyond_lost_tail_restarts_empty(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d)
    append(log, 5)
    log.delete_records_before(5)
    os.truncate(d / "00000000000000000000.log", 10)  # the data below the start is gone
    log = open_log(d)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    assert append(log).base_offset == 5


def test_retention_truncates_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_ms=1000, retention_ms=HOUR))
    raw, header = make_batch(3, producer_id=9, epoch=0, seq=0, ts=NOW)
    log.append(raw, header, now_ms=NOW)
    for j in range(3):
        append(log, 3, ts=NOW + 5 * HOUR, tag=j, now=NOW + 5 * HOUR)
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.producer_state.producer(9) is not None
    assert log.apply_retention(NOW + 5 * HOUR) == 1
    assert log.producer_state.producer(9) is None
    assert all(off >= log.segments[0].base_offset for off in list_snapshots(tmp_path / "t-0"))
