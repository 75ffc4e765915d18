"""A rolled segment is made durable by a background job (storage/roll_flush.py): the
append that rolls does not wait for the fsync, every durability path does, and a crash
before the job is done leaves a directory that recovery re-walks whole."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.checkpoint import list_snapshots
from oncelog.storage.config import LogConfig
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.roll_flush import RollFlusher
from oncelog.storage.segment import LOG_SUFFIX, TIME_INDEX_SUFFIX
from oncelog.storage.unified_log import UnifiedLog

from .test_storage_support import config, read_all

NOW = 1_700_000_000_000
# Small segments: 20 one-record batches of ~80 bytes each roll a few times.
CFG = config(segment_bytes=400)


class HeldFsync:
    """An fsync that waits for the test to open the gate (or fails, if told to)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fail = False
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        self.calls += 1
        if self.fail:
            raise OSError(5, "Input/output error")
        os.fsync(fd)


def open_log(path: Path, fsync: HeldFsync, cfg: LogConfig = CFG) -> UnifiedLog:
    return UnifiedLog.open(path, cfg, now_ms=NOW, roll_flusher=RollFlusher(fsync))


def append(log: UnifiedLog, i: int, *, pid: int = -1, seq: int = -1) -> int:
    batch = bytearray(
        build_batch(
            [(b"k%d" % i, b"v" * 40, None, NOW)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )
    )
    return log.append(batch, parse_header(batch), now_ms=NOW).last_offset


def fill_until_roll(log: UnifiedLog) -> int:
    """Append until the log has two segments; returns the offset the new one starts at."""
    i = 0
    while len(log.segments) == 1:
        append(log, i, pid=7, seq=i)
        i += 1
    return log.segments[-1].base_offset


def test_the_append_that_rolls_does_not_wait_for_the_fsync(tmp_path: Path) -> None:
    fsync = HeldFsync()
    log = open_log(tmp_path / "t-0", fsync)
    started = time.monotonic()
    rolled_at = fill_until_roll(log)
    assert time.monotonic() - started < 5  # the gate is closed: nothing waited on it
    assert fsync.entered.wait(5)  # the job is inside the old log's fsync
    old = log.segments[0]
    assert log.durable_offset < rolled_at
    # Until the job is done the old time index is not on disk: nothing vouches for
    # the old log, so a crash now makes recovery re-walk it.
    assert not old.path(TIME_INDEX_SUFFIX).exists()
    assert rolled_at not in list_snapshots(log.directory)
    fsync.gate.set()
    log.wait_for_roll_flush()
    assert log.durable_offset == rolled_at
    assert os.path.getsize(old.path(TIME_INDEX_SUFFIX)) == 12  # the sealed max entry
    assert rolled_at in list_snapshots(log.directory)
    log.close()


def test_a_crash_before_the_flush_recovers_every_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    fsync = HeldFsync()
    log = open_log(d, fsync)
    rolled_at = fill_until_roll(log)
    last = append(log, 99, pid=7, seq=rolled_at)
    before = read_all(log)
    assert fsync.entered.wait(5)
    threading.Timer(0.2, fsync.gate.set).start()
    log.abandon()  # the crash: the job is cancelled where it stands (and waited for)
    assert fsync.calls == 1  # only the old log's fsync, which it was in
    assert not (d / f"{0:020d}{TIME_INDEX_SUFFIX}").exists()
    assert list_snapshots(d) == []  # the roll's snapshot was never written

    with caplog.at_level(logging.WARNING, logger="oncelog.storage.recovery"):
        reopened = UnifiedLog.open(d, CFG, now_ms=NOW)
    assert "rebuilding indexes of segment 0" in caplog.text  # re-walked, not trusted
    assert read_all(reopened) == before
    assert reopened.log_end_offset == last + 1
    assert [s.base_offset for s in reopened.segments] == [0, rolled_at]
    # The producer state was rebuilt by replay: a retry of the last batch is a duplicate.
    batch = bytearray(
        build_batch(
            [(b"k99", b"v" * 40, None, NOW)],
            producer_id=7,
            producer_epoch=0,
            base_sequence=rolled_at,
        )
    )
    assert reopened.append(batch, parse_header(batch), now_ms=NOW).duplicate
    reopened.close()


def test_durable_acknowledgements_wait_for_the_roll_flush(tmp_path: Path) -> None:
    fsync = HeldFsync()
    log = open_log(tmp_path / "t-0", fsync)
    fill_until_roll(log)
    end = append(log, 50) + 1
    sync = GroupSync(os.fdatasync)  # the active segment's own sync is not held

    async def scenario() -> None:
        waiter = asyncio.create_task(sync.wait({log: end}))
        await asyncio.sleep(0.2)
        assert not waiter.done()  # the older segment is not durable yet
        fsync.gate.set()
        await asyncio.wait_for(waiter, 5)

    asyncio.run(scenario())
    assert log.durable_offset == end
    log.close()


def test_a_failed_roll_flush_withholds_every_later_durable_acknowledgement(tmp_path: Path) -> None:
    fsync = HeldFsync()
    fsync.fail = True
    fsync.gate.set()
    log = open_log(tmp_path / "t-0", fsync)
    rolled_at = fill_until_roll(log)
    end = append(log, 50) + 1
    sync = GroupSync(os.fdatasync)

    async def scenario() -> None:
        for _ in range(2):  # and again later: the failure is not forgotten
            with pytest.raises(OSError, match="Input/output error"):
                await sync.wait({log: end})

    asyncio.run(scenario())
    assert log.durable_offset < rolled_at
    with pytest.raises(OSError):
        log.close()
    log.abandon()


def test_flush_messages_1_waits_for_the_roll_flush_in_the_append(tmp_path: Path) -> None:
    fsync = HeldFsync()
    log = open_log(tmp_path / "t-0", fsync, config(segment_bytes=400, flush_messages=1))
    threading.Timer(0.3, fsync.gate.set).start()
    started = time.monotonic()
    rolled_at = fill_until_roll(log)
    # The append that rolled returned only once the old segment was fsynced too.
    assert time.monotonic() - started >= 0.25
    assert log.durable_offset == rolled_at + 1
    log.close()


def test_a_delete_during_the_flush_recreates_nothing(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    fsync = HeldFsync()
    log = open_log(d, fsync)
    fill_until_roll(log)
    assert fsync.entered.wait(5)
    log.delete()
    assert not d.exists()
    d.mkdir()  # a new topic of the same name: the old job must not write into it
    fsync.gate.set()
    log.wait_for_roll_flush(check=False)
    assert os.listdir(d) == []
    shutil.rmtree(d)


def test_the_cleaner_stops_below_a_segment_still_being_flushed(tmp_path: Path) -> None:
    fsync = HeldFsync()
    log = open_log(tmp_path / "t-0", fsync, config(segment_bytes=400, cleanup_policy="compact"))
    rolled_at = fill_until_roll(log)
    assert fsync.entered.wait(5)
    assert log.plan_cleaning(NOW, dedupe_buffer_bytes=1 << 20) is None
    fsync.gate.set()
    log.wait_for_roll_flush()
    plan = log.plan_cleaning(NOW, dedupe_buffer_bytes=1 << 20)
    assert plan is not None and plan.end_offset == rolled_at
    for seg in plan.segments:
        os.close(seg.fd)
    log.finish_cleaning(None)
    log.close()


def test_a_clean_close_waits_for_the_roll_flush(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    fsync = HeldFsync()
    log = open_log(d, fsync)
    rolled_at = fill_until_roll(log)
    threading.Timer(0.2, fsync.gate.set).start()
    log.close()
    assert fsync.calls >= 1
    assert os.path.getsize(d / f"{0:020d}{TIME_INDEX_SUFFIX}") == 12
    assert os.path.getsize(d / f"{rolled_at:020d}{LOG_SUFFIX}") > 0


def test_a_log_rolling_faster_than_its_flushes_waits_for_the_older_ones(tmp_path: Path) -> None:
    fsync = HeldFsync()
    log = open_log(tmp_path / "t-0", fsync)
    threading.Timer(0.3, fsync.gate.set).start()
    started = time.monotonic()
    i = 0
    while len(log.segments) < 3:  # two rolls, both flushes in flight (the gate is closed)
        append(log, i)
        i += 1
    assert time.monotonic() - started < 0.25  # the second roll did not wait
    while len(log.segments) < 4:
        append(log, i)
        i += 1
    assert time.monotonic() - started >= 0.25  # the third roll waited for the first flush
    log.close()
