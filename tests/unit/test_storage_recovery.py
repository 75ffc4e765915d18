from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.storage.checkpoint import list_snapshots, snapshot_path
from oncelog.storage.segment import LogSegment, offset_file_name
from oncelog.storage.unified_log import UnifiedLog

from .test_storage_support import (
    NOW,
    append,
    config,
    make_batch,
    open_log,
    read_all,
    read_offsets,
)

CFG = config(segment_bytes=600, index_interval_bytes=150)


def fill(log: UnifiedLog, batches: int, start_tag: int = 0) -> None:
    for i in range(start_tag, start_tag + batches):
        append(log, 3, tag=i, ts=NOW + i * 10, ts_step=1)


def crashed_copy(tmp_path: Path, batches: int = 30) -> tuple[Path, UnifiedLog]:
    """A log whose owner 'crashed': never closed, so no marker, index tails unwritten."""
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    fill(log, batches)
    return d, log


def active_log_file(d: Path) -> Path:
    return sorted(d.glob("*.log"))[-1]


def check_healthy(log: UnifiedLog, end: int) -> None:
    assert log.log_end_offset == end
    assert read_all(log) == list(range(log.log_start_offset, end))
    for offset in range(log.log_start_offset, end):
        got = read_offsets(log, offset)
        assert got[0] <= offset <= got[-1]
    assert append(log, 2).base_offset == end
    assert read_offsets(log, end) == [end, end + 1]


def test_crash_without_close_recovers_everything(tmp_path: Path) -> None:
    d, _ = crashed_copy(tmp_path)
    log = open_log(d, CFG)
    check_healthy(log, 90)


def test_truncated_mid_batch(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    active = old.segments[-1]
    found = active.find_batch(89)
    assert found is not None
    last_pos, last = found
    path = active_log_file(d)
    os.truncate(path, last_pos + last.size // 2)
    log = open_log(d, CFG)
    assert os.path.getsize(path) == last_pos
    check_healthy(log, 87)


def test_garbage_after_last_batch(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    size = old.segments[-1].size
    with open(active_log_file(d), "ab") as f:
        f.write(os.urandom(300))
    log = open_log(d, CFG)
    assert log.segments[-1].size == size
    check_healthy(log, 90)


def test_corrupt_byte_cuts_at_that_batch(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    active = old.segments[-1]
    raw, _ = make_batch(3, tag=0)
    batch_size = len(raw)
    with open(active_log_file(d), "r+b") as f:
        f.seek(batch_size + 70)  # inside the second batch of the active segment
        byte = f.read(1)
        f.seek(batch_size + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = open_log(d, CFG)
    check_healthy(log, active.base_offset + 3)


def test_zeroed_tail_like_a_power_loss(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    with open(active_log_file(d), "ab") as f:
        f.write(bytes(4096))
    log = open_log(d, CFG)
    check_healthy(log, 90)


def test_missing_and_broken_index_files_are_rebuilt(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    old.close()
    segs = sorted(d.glob("*.index"))
    os.unlink(segs[0])
    os.unlink(segs[1].with_suffix(".timeindex"))
    with open(segs[2], "ab") as f:
        f.write(b"xyz")  # partial entry
    with open(segs[3], "r+b") as f:  # whole entries, but nonsense: caught on lazy load
        f.write(bytes(range(16)) * 2)
    log = open_log(d, CFG)
    check_healthy(log, 90)
    for t in range(0, 300, 7):
        ts = NOW + t
        found = log.offset_for_timestamp(ts)
        i, k = divmod(t, 10)
        expected = (3 * i + k, ts) if k < 3 else (3 * (i + 1), NOW + 10 * (i + 1))
        assert found == (expected if expected[0] < 90 else None)
    assert os.path.getsize(segs[0]) % 8 == 0 and segs[0].exists()


def test_corrupt_older_segment_without_index_drops_the_rest(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path)
    old.close()
    second = old.segments[1]
    os.unlink(second.path(".index"))
    with open(second.path(".log"), "r+b") as f:
        f.seek(second.size - 5)
        f.write(b"\xff\xff\xff\xff\xff")  # last batch of the 2nd segment
    log = open_log(d, CFG)
    assert [s.base_offset for s in log.segments] == [0, second.base_offset]
    assert log.log_end_offset == second.next_offset - 3
    assert len(list(d.glob("*.log"))) == 2
    check_healthy(log, second.next_offset - 3)


def test_clean_shutdown_skips_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, old = crashed_copy(tmp_path)
    old.close()
    calls: list[int] = []
    real = LogSegment.recover

    def recover(self: LogSegment) -> int:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(LogSegment, "recover", recover)
    log = open_log(d, CFG)
    assert calls == []
    check_healthy(log, 90)
    log.close()
    # Data changed behind the marker's back: the marker no longer vouches for it.
    with open(active_log_file(d), "ab") as f:
        f.write(os.urandom(100))
    log = open_log(d, CFG)
    assert calls == [1]
    check_healthy(log, 92)


def test_leftovers_are_removed(tmp_path: Path) -> None:
    d, old = crashed_copy(tmp_path, 3)
    old.close()
    (d / (offset_file_name(0, ".log") + ".deleted")).write_bytes(b"x")
    (d / "log-start-offset.checkpoint.tmp").write_bytes(b"x")
    (d / offset_file_name(500, ".index")).write_bytes(b"")
    log = open_log(d, CFG)
    names = set(os.listdir(d))
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert offset_file_name(500, ".index") not in names
    check_healthy(log, 9)


def test_reopen_empty_directory_twice(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    open_log(d, CFG).close()
    log = open_log(d, CFG)
    assert log.log_end_offset == 0
    check_healthy(log, 0)


# -- producer state ------------------------------------------------------------------------


def idem(log: UnifiedLog, seq: int, count: int = 2, pid: int = 7, now: int = NOW):
    raw, header = make_batch(count, producer_id=pid, epoch=0, seq=seq, tag=seq)
    return log.append(raw, header, now_ms=now)


@pytest.mark.parametrize("batches", [1, 40])  # without / with snapshots from rolls
def test_crash_rebuilds_producer_state(tmp_path: Path, batches: int) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    for i in range(batches):
        assert not idem(log, 2 * i).duplicate
    last = idem(log, 2 * batches)
    # crash: no close(), no snapshot at the end
    log = open_log(d, CFG)
    retry = idem(log, 2 * batches)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (last.base_offset, last.last_offset)
    assert not idem(log, 2 * batches + 2).duplicate
    assert log.log_end_offset == last.last_offset + 3


def test_corrupt_snapshot_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    for i in range(30):
        idem(log, 2 * i)
    log.close()
    snaps = list_snapshots(d)
    assert len(snaps) == 2
    for off in snaps:
        snapshot_path(d, off).write_bytes(b"garbage")
    log = open_log(d, CFG)
    assert idem(log, 58).duplicate
    assert not idem(log, 60).duplicate


def test_snapshots_are_pruned_and_taken_on_roll(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    for i in range(30):
        idem(log, 2 * i)
    log.wait_for_roll_flush()  # the roll's snapshot is written by its background flush
    assert len(list_snapshots(d)) == 2
    assert list_snapshots(d)[-1] == log.segments[-1].base_offset
    log.take_snapshot()
    assert list_snapshots(d) == [log.segments[-1].base_offset, log.log_end_offset]


def test_snapshot_beyond_truncated_log_is_dropped(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    idem(log, 0)
    idem(log, 2)
    log.take_snapshot()  # at offset 4
    os.truncate(active_log_file(d), os.path.getsize(active_log_file(d)) - 1)
    log = open_log(d, CFG)
    assert log.log_end_offset == 2
    assert 4 not in list_snapshots(d)
    # The lost batch is new again, not a duplicate.
    result = idem(log, 2)
    assert not result.duplicate and result.base_offset == 2


@pytest.mark.parametrize("step", [1, -1])  # segment max in its last / first batch
def test_rebuilt_indexes_keep_the_segment_max_timestamp(tmp_path: Path, step: int) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    for i in range(20):
        append(log, 3, tag=i, ts=NOW + 1000 + step * i)
    maxima = [s.max_timestamp for s in log.segments]
    overall = log.max_timestamp()
    log.close()
    first, second = sorted(d.glob("*.log"))[:2]
    os.unlink(first.with_suffix(".index"))
    os.unlink(first.with_suffix(".timeindex"))
    second.with_suffix(".index").write_bytes(bytes(range(16)) * 2)  # lazily rebuilt
    log = open_log(d, CFG)
    assert log.segments[1].find_batch(log.segments[1].base_offset) is not None
    log.close()
    log = open_log(d, CFG)
    assert [s.max_timestamp for s in log.segments] == maxima
    assert log.max_timestamp() == overall


@settings(max_examples=30, deadline=None)
@given(
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=25),
    cut=st.floats(0, 1),
    garbage=st.sampled_from([b"", b"\x00" * 100, b"\xff" * 7, b"junk" * 40]),
)
def test_recovery_keeps_exactly_the_whole_batches(
    tmp_path_factory: pytest.TempPathFactory, counts: list[int], cut: float, garbage: bytes
) -> None:
    d = tmp_path_factory.mktemp("rec") / "t-0"
    log = open_log(d, CFG)
    ends = []  # (file end position in the active segment, next offset) per batch
    for i, count in enumerate(counts):
        append(log, count, tag=i, value_size=7 * (i % 5))
        seg = log.segments[-1]
        ends.append((seg.base_offset, seg.size, log.log_end_offset))
    active = log.segments[-1]
    in_active = [(size, end) for base, size, end in ends if base == active.base_offset]
    keep = int(active.size * cut)
    path = active.path(".log")
    original = path.read_bytes()
    os.truncate(path, keep)
    with open(path, "ab") as f:
        f.write(garbage)
    damaged = path.read_bytes()
    # A batch survives iff its bytes are intact (garbage may happen to restore a cut tail).
    intact = [end for size, end in in_active if damaged[:size] == original[:size]]
    expected = max(intact, default=active.base_offset)
    log = open_log(d, CFG)
    assert log.log_end_offset == expected
    assert read_all(log) == list(range(expected))
    assert append(log, 2).base_offset == expected
