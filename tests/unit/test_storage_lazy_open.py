"""Start-up work proportional to what is needed: the active segment's indexes load on
first use after a clean shutdown, many logs close with one checkpoint, and none of this
weakens recovery after a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CleanShutdown,
    take_clean_shutdowns,
)
from oncelog.storage.index import OffsetIndex, TimeIndex
from oncelog.storage.log_batch import close_logs, open_logs
from oncelog.storage.segment import LogSegment
from oncelog.storage.unified_log import UnifiedLog

from .test_storage_support import NOW, append, config, open_log, read_all, read_offsets

# One segment (the active one) holding many index entries.
CFG = config(segment_bytes=1 << 20, index_interval_bytes=150)
BATCHES = 40  # x 3 records


def fill(log: UnifiedLog, batches: int = BATCHES, start: int = 0) -> None:
    for i in range(start, start + batches):
        append(log, 3, tag=i, ts=NOW + i * 10, ts_step=1)


def closed_log(d: Path) -> None:
    log = open_log(d, CFG)
    fill(log)
    log.close()


class LoadCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset_loads = 0
        self.recovers = 0
        real_load, real_recover = OffsetIndex.load, LogSegment.recover

        def load(index: OffsetIndex, log_size: int) -> None:
            self.offset_loads += 1
            real_load(index, log_size)

        def recover(seg: LogSegment) -> int:
            self.recovers += 1
            return real_recover(seg)

        monkeypatch.setattr(OffsetIndex, "load", load)
        monkeypatch.setattr(LogSegment, "recover", recover)


def check_every_offset(log: UnifiedLog, end: int) -> None:
    assert log.log_end_offset == end
    assert read_all(log) == list(range(end))
    for offset in range(0, end, 7):
        got = read_offsets(log, offset, max_bytes=1)
        assert got[0] <= offset <= got[-1]


def test_active_index_is_not_read_until_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    entries = os.path.getsize(next(d.glob("*.index"))) // OffsetIndex.entry_size
    assert entries > 10
    counter = LoadCounter(monkeypatch)
    log = open_log(d, CFG)
    assert (counter.offset_loads, counter.recovers) == (0, 0)
    assert log.log_end_offset == BATCHES * 3
    assert log.max_timestamp() == (NOW + (BATCHES - 1) * 10 + 2, BATCHES * 3 - 1)
    read_offsets(log, 50, max_bytes=1)  # the first lookup loads the offset index once
    assert counter.offset_loads == 1
    check_every_offset(log, BATCHES * 3)
    assert counter.offset_loads == 1


def test_first_append_to_a_lazy_segment_keeps_its_index_whole(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    log = open_log(d, CFG)
    fill(log, 20, start=BATCHES)  # appends load the index before adding entries to it
    log.close()
    index = OffsetIndex(next(d.glob("*.index")), 0)
    index.load(os.path.getsize(next(d.glob("*.log"))))
    assert len(index) > 15
    log = open_log(d, CFG)
    check_every_offset(log, (BATCHES + 20) * 3)


def test_lazy_index_after_a_crash_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    log = open_log(d, CFG)  # lazily: index not loaded
    fill(log, 10, start=BATCHES)
    # Crash: the new index tail and the appended batches' fsync never happen.
    log.abandon()
    counter = LoadCounter(monkeypatch)
    log = open_log(d, CFG)
    assert counter.recovers == 1  # the marker was consumed by the lazy open
    check_every_offset(log, (BATCHES + 10) * 3)


def test_crash_after_a_lazy_open_without_appends_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    open_log(d, CFG).abandon()
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    counter = LoadCounter(monkeypatch)
    log = open_log(d, CFG)
    assert counter.recovers == 1
    check_every_offset(log, BATCHES * 3)


def test_corrupt_lazy_index_is_rebuilt_on_first_use(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    path = next(d.glob("*.index"))
    data = bytearray(path.read_bytes())
    assert len(data) >= 4 * OffsetIndex.entry_size
    # Whole entries, the last one intact (the open checks only that one), but the
    # second entry repeats the first: not increasing, found when the index loads.
    data[8:16] = data[0:8]
    path.write_bytes(bytes(data))
    log = open_log(d, CFG)
    check_every_offset(log, BATCHES * 3)  # loads, finds it corrupt, rebuilds
    fill(log, 5, start=BATCHES)
    log.close()
    rebuilt = OffsetIndex(path, 0)
    rebuilt.load(os.path.getsize(next(d.glob("*.log"))))  # raises if still corrupt
    assert len(rebuilt) >= len(data) // OffsetIndex.entry_size
    check_every_offset(open_log(d, CFG), (BATCHES + 5) * 3)


def test_last_index_entry_pointing_elsewhere_means_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    path = next(d.glob("*.index"))
    data = bytearray(path.read_bytes())
    data[-8:-4] = (int.from_bytes(data[-8:-4], "big") - 1).to_bytes(4, "big")  # wrong offset
    path.write_bytes(bytes(data))
    counter = LoadCounter(monkeypatch)
    log = open_log(d, CFG)
    assert counter.recovers == 1
    check_every_offset(log, BATCHES * 3)


def test_torn_time_index_means_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "t-0"
    closed_log(d)
    path = next(d.glob("*.timeindex"))
    with open(path, "ab") as f:
        f.write(b"\x00" * (TimeIndex.entry_size - 1))
    counter = LoadCounter(monkeypatch)
    log = open_log(d, CFG)
    assert counter.recovers == 1
    check_every_offset(log, BATCHES * 3)
    assert log.max_timestamp() == (NOW + (BATCHES - 1) * 10 + 2, BATCHES * 3 - 1)


def many(tmp_path: Path, n: int) -> list[Path]:
    return [tmp_path / f"t-{i}" for i in range(n)]


def open_many(
    tmp_path: Path, dirs: list[Path], clean: dict[str, CleanShutdown]
) -> list[UnifiedLog]:
    return open_logs(
        tmp_path,
        [
            lambda sync, d=d: UnifiedLog.open(  # type: ignore[misc]
                d, CFG, now_ms=NOW, sync=sync, clean=clean.get(d.name)
            )
            for d in dirs
        ],
        syncfs_min=1,  # the batch path, whatever the count
    )


def test_close_logs_writes_one_checkpoint_that_the_next_open_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = many(tmp_path, 4)
    logs = open_many(tmp_path, dirs, {})
    for i, log in enumerate(logs):
        for seq in range(i + 1):  # partition i: i+1 idempotent batches of producer 7
            r = append(log, 2, producer_id=7, epoch=0, seq=seq * 2, tag=seq)
            assert r.base_offset == seq * 2
    checkpoint = tmp_path / "clean-shutdown.json"
    assert close_logs(logs, tmp_path, checkpoint, syncfs_min=1) == []
    assert all(log.closed for log in logs)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    entries = take_clean_shutdowns(checkpoint)
    assert not checkpoint.exists()  # taken: a crash from now on is not a clean stop
    assert {name: e.log_end_offset for name, e in entries.items()} == {
        "t-0": 2,
        "t-1": 4,
        "t-2": 6,
        "t-3": 8,
    }
    counter = LoadCounter(monkeypatch)
    logs = open_many(tmp_path, dirs, entries)
    assert counter.recovers == 0
    for i, log in enumerate(logs):
        # The producer state came through the checkpoint: a retried last batch is a
        # duplicate, the next sequence is accepted at the log end.
        last = append(log, 2, producer_id=7, epoch=0, seq=i * 2, tag=i)
        assert last.duplicate and last.base_offset == i * 2
        nxt = append(log, 2, producer_id=7, epoch=0, seq=(i + 1) * 2, tag=i + 1)
        assert not nxt.duplicate and nxt.base_offset == (i + 1) * 2
    for log in logs:
        log.abandon()


def test_checkpoint_does_not_vouch_for_a_grown_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = many(tmp_path, 2)
    logs = open_many(tmp_path, dirs, {})
    for log in logs:
        fill(log, 3)
    checkpoint = tmp_path / "clean-shutdown.json"
    close_logs(logs, tmp_path, checkpoint, syncfs_min=1)
    entries = take_clean_shutdowns(checkpoint)
    # Data appended behind the checkpoint's back (by a later, crashed run).
    grown = open_log(dirs[1], CFG)
    fill(grown, 2, start=3)
    grown.abandon()
    counter = LoadCounter(monkeypatch)
    logs = open_many(tmp_path, dirs, entries)
    assert counter.recovers == 1
    assert [log.log_end_offset for log in logs] == [9, 15]
    assert read_all(logs[1]) == list(range(15))
    for log in logs:
        log.abandon()


def test_damaged_checkpoint_vouches_for_nothing(tmp_path: Path) -> None:
    checkpoint = tmp_path / "clean-shutdown.json"
    checkpoint.write_bytes(b'{"version": 0, "logs": {"t-0": [12')
    assert take_clean_shutdowns(checkpoint) == {}
    assert not checkpoint.exists()
    assert take_clean_shutdowns(checkpoint) == {}


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("crashed", [False, True])
def test_idle_partitions_hold_no_descriptor(tmp_path: Path, crashed: bool) -> None:
    dirs = many(tmp_path, 30)
    logs = open_many(tmp_path, dirs, {})
    for log in logs:
        fill(log, 2)
    if crashed:
        for log in logs:
            log.abandon()
    else:
        close_logs(logs, tmp_path, tmp_path / "clean-shutdown.json", syncfs_min=1)
    before = open_descriptors()
    logs = open_many(tmp_path, dirs, take_clean_shutdowns(tmp_path / "clean-shutdown.json"))
    assert open_descriptors() == before  # opened, recovered or not, and idle
    assert read_all(logs[3]) == list(range(6))  # a read opens that one partition's file
    assert open_descriptors() == before + 1
    assert append(logs[3], 1).base_offset == 6
    assert open_descriptors() == before + 1
    for log in logs:
        log.close()
    assert open_descriptors() == before


def test_few_logs_are_synced_and_closed_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below SYNCFS_MIN_LOGS no syncfs (it would also flush every other process's dirty
    data): each log is opened with its own fsyncs and closed the single way, with its
    own clean-shutdown marker and no checkpoint."""
    synced: list[Path] = []
    monkeypatch.setattr("oncelog.storage.log_batch.sync_filesystem", synced.append)
    dirs = many(tmp_path, 3)
    logs = open_logs(
        tmp_path,
        [lambda sync, d=d: UnifiedLog.open(d, CFG, now_ms=NOW, sync=sync) for d in dirs],  # type: ignore[misc]
    )
    for log in logs:
        fill(log, 2)
    checkpoint = tmp_path / "clean-shutdown.json"
    assert close_logs(logs, tmp_path, checkpoint) == []
    assert synced == []
    assert not checkpoint.exists()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert all(log.closed for log in logs)
