from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.records.batch import InvalidRecordError, parse_header
from oncelog.records.compression import CompressionType
from oncelog.storage.errors import LogClosedError
from oncelog.storage.segment import offset_file_name
from oncelog.storage.unified_log import (
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnifiedLog,
)

from .test_storage_support import (
    NOW,
    append,
    config,
    decode_slice,
    make_batch,
    open_log,
    read_all,
    read_offsets,
)

SMALL = {"segment_bytes": 600, "index_interval_bytes": 150}


@pytest.fixture
def log(tmp_path: Path) -> UnifiedLog:
    return open_log(tmp_path / "topic-0", config(**SMALL))


def fill(log: UnifiedLog, batches: int, count: int = 3) -> None:
    for i in range(batches):
        append(log, count, tag=i, ts=NOW + i * 10, ts_step=1)


def test_new_log_is_empty(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.last_stable_offset == 0
    assert log.read(0, 1000) is None
    assert log.size_bytes() == 0
    assert log.max_timestamp() == (-1, -1)
    assert log.offset_for_timestamp(0) is None
    assert (tmp_path / "t-0" / offset_file_name(0, ".log")).exists()


def test_append_assigns_offsets_and_rolls(log: UnifiedLog) -> None:
    results = [append(log, 3, tag=i) for i in range(40)]
    assert [r.base_offset for r in results] == list(range(0, 120, 3))
    assert [r.last_offset for r in results] == list(range(2, 120, 3))
    assert all(r.log_append_time == -1 and not r.duplicate for r in results)
    assert log.log_end_offset == 120
    assert len(log.segments) > 5
    for seg in log.segments:
        assert seg.size <= 600
        assert os.path.getsize(seg.path(".log")) == seg.size
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert read_all(log) == list(range(120))


def test_stored_batches_have_assigned_offsets_and_valid_crc(log: UnifiedLog) -> None:
    fill(log, 5)
    sl = log.read(0, 1 << 20)
    assert sl is not None
    batches = decode_slice(sl.read())  # decode_batch verifies the CRC
    assert batches[0][0].base_offset == 0
    assert [r.offset for _, recs in batches for r in recs] == list(range(len(batches) * 3))


def test_every_offset_reads_from_its_batch(log: UnifiedLog) -> None:
    fill(log, 30)
    for offset in range(log.log_end_offset):
        got = read_offsets(log, offset)
        assert got[0] <= offset <= got[2], offset
        assert got[0] % 3 == 0


def test_read_stays_within_one_segment(log: UnifiedLog) -> None:
    fill(log, 30)
    seg = log.segments[0]
    got = read_offsets(log, 0)
    assert got[-1] == seg.next_offset - 1


def test_read_out_of_range(log: UnifiedLog) -> None:
    fill(log, 2)
    assert log.read(6, 100) is None  # == log end: empty fetch
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_read_max_bytes_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 10)
    size = log.segments[0].size // 10
    assert read_offsets(log, 0, size * 3) == list(range(9))
    assert read_offsets(log, 0, size * 3 + size - 1) == list(range(9))
    assert read_offsets(log, 4, size * 2) == list(range(3, 9))
    sl = log.read(0, size * 4 + 5)
    assert sl is not None and sl.length == size * 4


def test_read_min_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 3)
    assert read_offsets(log, 3, 10) == [3, 4, 5]  # KIP-74: the first batch whole
    assert read_offsets(log, 3, 0) == [3, 4, 5]
    assert log.read(3, 10, min_one=False) is None


def test_read_max_offset(log: UnifiedLog) -> None:
    fill(log, 4)
    assert read_offsets(log, 0, max_offset=6) == [0, 1, 2, 3, 4, 5]
    assert read_offsets(log, 0, max_offset=3) == [0, 1, 2]
    assert read_offsets(log, 0, max_offset=4) == list(range(6))  # batch 3..5 starts below it
    assert log.read(3, 100, max_offset=3) is None
    assert log.read(6, 100, max_offset=3) is None
    assert read_offsets(log, 0, max_offset=100) == read_offsets(log, 0)


def test_compressed_batches_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for codec in CompressionType:
        append(log, 5, compression=codec, tag=int(codec))
    assert read_all(log) == list(range(25))


def test_append_rejects(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(max_message_bytes=200, segment_bytes=300))
    raw, header = make_batch(10, value_size=30)
    with pytest.raises(RecordTooLargeError):
        log.append(raw, header, now_ms=NOW)
    log.update_config(config(max_message_bytes=100000, segment_bytes=300))
    with pytest.raises(RecordBatchTooLargeError):
        log.append(raw, header, now_ms=NOW)
    raw, header = make_batch(1)
    with pytest.raises(InvalidRecordError):
        log.append(raw, header.__class__(**{**_fields(header), "attributes": 0x20}), now_ms=NOW)
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def _fields(header: object) -> dict:
    return {name: getattr(header, name) for name in header.__slots__}  # type: ignore[attr-defined]


def test_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"))
    result = append(log, 2, ts=5, now=NOW + 7)
    assert result.log_append_time == NOW + 7
    sl = log.read(0, 1000)
    assert sl is not None
    [(header, records)] = decode_slice(sl.read())
    assert header.is_log_append_time and header.max_timestamp == NOW + 7
    assert [r.timestamp for r in records] == [NOW + 7, NOW + 7]
    assert log.max_timestamp() == (NOW + 7, 0)
    assert log.offset_for_timestamp(NOW) == (0, NOW + 7)


def test_segment_ms_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_ms=1000))
    append(log, now=NOW)
    append(log, now=NOW + 1000)
    assert len(log.segments) == 1
    append(log, now=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_full_index_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(segment_index_bytes=24, index_interval_bytes=0))
    for i in range(12):
        append(log, tag=i, ts=NOW + i)
    # 24 bytes = 2 time index entries, one per batch after the first: 3 batches a segment.
    assert all(len(s.time_index) <= 2 for s in log.segments)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert read_all(log) == list(range(12))


def test_index_entries_every_interval(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=1000))
    fill(log, 40)
    seg = log.segments[0]
    batch = seg.size // 40
    assert len(seg.offset_index) == pytest.approx(seg.size / (1000 + batch), abs=2)
    seg.offset_index.persist()
    assert os.path.getsize(seg.path(".index")) == 8 * len(seg.offset_index)


def test_offset_for_timestamp(log: UnifiedLog) -> None:
    # batch i holds records at NOW + 10i, +1, +2 with offsets 3i..3i+2
    fill(log, 30)
    assert log.offset_for_timestamp(0) == (0, NOW)
    assert log.offset_for_timestamp(NOW) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (1, NOW + 1)
    assert log.offset_for_timestamp(NOW + 3) == (3, NOW + 10)
    assert log.offset_for_timestamp(NOW + 152) == (47, NOW + 152)
    for i in range(30):
        for k in range(3):
            assert log.offset_for_timestamp(NOW + 10 * i + k) == (3 * i + k, NOW + 10 * i + k)
    assert log.offset_for_timestamp(NOW + 293) is None


def test_offset_for_timestamp_out_of_order_and_compressed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, 4, ts=NOW + 100, ts_step=-30, compression=CompressionType.ZSTD)  # 100,70,40,10
    append(log, 2, ts=NOW + 50, ts_step=0)
    assert log.offset_for_timestamp(NOW + 60) == (0, NOW + 100)
    assert log.offset_for_timestamp(NOW + 5) == (0, NOW + 100)
    assert log.offset_for_timestamp(NOW + 101) is None
    assert log.max_timestamp() == (NOW + 100, 0)


def test_max_timestamp(log: UnifiedLog) -> None:
    fill(log, 10)
    append(log, 3, ts=NOW + 5000, ts_step=-1)  # max is its first record
    fill(log, 10)
    assert log.max_timestamp() == (NOW + 5000, 30)


def spy_fsync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_flush_messages_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = spy_fsync(monkeypatch)
    log = open_log(tmp_path / "t-0", config(flush_messages=1))
    calls.clear()
    append(log)
    append(log)
    assert len(calls) == 2
    log.update_config(config(flush_messages=4))
    calls.clear()
    append(log, 2)
    assert calls == []
    append(log, 2)
    assert len(calls) == 1


def test_flush_ms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0", config(flush_ms=1000))
    calls = spy_fsync(monkeypatch)
    append(log, now=NOW + 10)
    log.maybe_flush(NOW + 500)
    assert calls == []
    log.maybe_flush(NOW + 1000)
    assert calls
    calls.clear()
    log.maybe_flush(NOW + 5000)  # nothing new to flush
    assert calls == []


def test_closed_log_refuses(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        append(log)
    with pytest.raises(LogClosedError):
        log.read(0, 100)


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log)
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_reopen_after_close_keeps_everything(tmp_path: Path) -> None:
    cfg = config(**SMALL)
    log = open_log(tmp_path / "t-0", cfg)
    fill(log, 30)
    before = [(o, read_offsets(log, o)) for o in range(0, 90, 7)]
    ts_before = [log.offset_for_timestamp(NOW + t) for t in range(0, 300, 13)]
    log.close()
    assert (tmp_path / "t-0" / ".clean_shutdown").exists()
    log = open_log(tmp_path / "t-0", cfg)
    assert not (tmp_path / "t-0" / ".clean_shutdown").exists()
    assert log.log_end_offset == 90
    assert [(o, read_offsets(log, o)) for o in range(0, 90, 7)] == before
    assert [log.offset_for_timestamp(NOW + t) for t in range(0, 300, 13)] == ts_before
    assert log.max_timestamp() == (NOW + 292, 89)
    assert append(log, 1).base_offset == 90


def test_file_slice_is_raw_bytes(log: UnifiedLog) -> None:
    fill(log, 3)
    sl = log.read(0, 1 << 20)
    assert sl is not None
    data = sl.read()
    assert os.pread(sl.fd, sl.length, sl.position) == data
    assert parse_header(data).base_offset == 0
