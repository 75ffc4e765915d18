from __future__ import annotations

import os
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.records.builder import iter_batches
from oncelog.storage.producer_state import ProducerStateError
from oncelog.storage.txn_index import AbortedTxn
from oncelog.storage.unified_log import UnifiedLog

from .test_storage_support import NOW, append, config, make_batch, make_marker, open_log

CFG = config(segment_bytes=700, index_interval_bytes=100)


class Txn:
    """A transactional producer writing to one log."""

    def __init__(self, log: UnifiedLog, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, count: int = 2) -> tuple[int, int]:
        raw, header = make_batch(
            count,
            producer_id=self.pid,
            epoch=self.epoch,
            seq=self.seq,
            transactional=True,
            tag=self.seq,
        )
        self.seq += count
        r = self.log.append(raw, header, now_ms=NOW)
        return r.base_offset, r.last_offset

    def end(self, commit: bool, coordinator_epoch: int = 0) -> int:
        raw, header = make_marker(self.pid, self.epoch, commit, coordinator_epoch)
        return self.log.append_control(raw, header, now_ms=NOW).base_offset


@pytest.fixture
def log(tmp_path: Path) -> UnifiedLog:
    return open_log(tmp_path / "t-0", CFG)


def test_lso_follows_open_transactions(log: UnifiedLog) -> None:
    append(log, 2)
    a, b = Txn(log, 1), Txn(log, 2)
    assert log.last_stable_offset == 2
    a_first, _ = a.send()
    assert log.last_stable_offset == a_first == 2
    append(log, 1)
    b.send()
    assert (log.high_watermark, log.last_stable_offset) == (7, 2)
    a.end(commit=True)
    assert log.last_stable_offset == 5  # b's first offset
    b.end(commit=False)
    assert log.last_stable_offset == log.high_watermark == 9


def test_abort_writes_txn_index_entry(log: UnifiedLog) -> None:
    a, b = Txn(log, 1), Txn(log, 2)
    a.send()  # 0-1
    b.send()  # 2-3
    a_marker = a.end(commit=False)  # 4; b still open: LSO after = 2
    b.send()  # 5-6
    b_marker = b.end(commit=False)  # 7
    entries = [t for s in log.segments for t in s.txn_index.entries]
    assert entries == [AbortedTxn(1, 0, a_marker, 2), AbortedTxn(2, 2, b_marker, 8)]
    assert log.aborted_transactions(0, 8) == [(1, 0), (2, 2)]
    assert log.aborted_transactions(5, 8) == [(2, 2)]
    assert log.aborted_transactions(0, 2) == [(1, 0)]
    assert log.aborted_transactions(8, 8) == []


def test_commit_writes_no_entry(log: UnifiedLog) -> None:
    a = Txn(log, 1)
    a.send()
    a.end(commit=True)
    assert all(len(s.txn_index) == 0 for s in log.segments)
    assert log.aborted_transactions(0, 3) == []


def test_marker_batch_is_stored(log: UnifiedLog) -> None:
    a = Txn(log, 1)
    a.send()
    marker = a.end(commit=False)
    sl = log.read(marker, 1000)
    assert sl is not None
    [(header, records)] = list(iter_batches(sl.read()))
    assert header.is_control and header.base_offset == marker and len(records) == 1


def test_fenced_marker_is_rejected(log: UnifiedLog) -> None:
    a = Txn(log, 1)
    a.send()
    a.end(commit=True, coordinator_epoch=5)
    a.send()
    with pytest.raises(ProducerStateError) as err:
        a.end(commit=False, coordinator_epoch=4)
    assert err.value.error_code == ErrorCode.transaction_coordinator_fenced
    assert log.last_stable_offset == 3


def test_aborted_transactions_across_segments(log: UnifiedLog) -> None:
    producers = [Txn(log, pid) for pid in range(1, 4)]
    expected: list[tuple[int, int, int]] = []  # (pid, first, marker)
    for round_ in range(12):
        for p in producers:
            first, _ = p.send(3)
            if round_ % 2 == 0:
                filler = append(log, 1)
                assert filler.base_offset > first
            marker = p.end(commit=p.pid != 2)
            if p.pid == 2:
                expected.append((p.pid, first, marker))
    assert len(log.segments) > 3
    end = log.log_end_offset
    assert log.aborted_transactions(0, end) == [(pid, first) for pid, first, _ in expected]
    for start in range(0, end, 5):
        for stop in range(start + 1, end + 1, 7):
            want = [(pid, f) for pid, f, m in expected if m >= start and f < stop]
            assert log.aborted_transactions(start, stop) == want, (start, stop)


def test_recovery_rebuilds_txn_state_and_index(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    a, b = Txn(log, 1), Txn(log, 2)
    for _ in range(10):
        a.send()
        b.send()
        a.end(commit=False)
        b.end(commit=True)
    b.send()  # left open
    want = log.aborted_transactions(0, log.log_end_offset)
    lso = log.last_stable_offset
    entries = [list(s.txn_index.entries) for s in log.segments]
    # crash, and lose every txn index file as well
    for f in d.glob("*.txnindex"):
        os.unlink(f)
    log = open_log(d, CFG)
    assert log.last_stable_offset == lso
    assert log.aborted_transactions(0, log.log_end_offset) == want
    assert [list(s.txn_index.entries) for s in log.segments] == entries
    b2 = Txn(log, 2)
    b2.seq = b.seq
    b2.end(commit=True)
    assert log.last_stable_offset == log.high_watermark


def test_recovery_after_clean_close_keeps_txn_state(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    a = Txn(log, 1)
    a.send()
    a.end(commit=False)
    a.send()
    lso = log.last_stable_offset
    log.close()
    log = open_log(d, CFG)
    assert log.last_stable_offset == lso == 3
    assert log.aborted_transactions(0, 10) == [(1, 0)]
    # read_committed fetch stops at the LSO
    sl = log.read(0, 1 << 20, max_offset=log.last_stable_offset)
    assert sl is not None
    assert [h.base_offset for h, _ in iter_batches(sl.read())] == [0, 2]


@pytest.mark.parametrize("clean", [True, False], ids=["clean-close", "crash"])
def test_a_tv2_producer_whose_last_record_is_a_marker_survives_reopening(
    tmp_path: Path, clean: bool
) -> None:
    """A transaction-version-2 marker bumps the producer's epoch, which empties its batch
    cache; reopening the log must keep the producer and its epoch (it fences the old one)."""
    d = tmp_path / "t-0"
    log = open_log(d, CFG)
    old = Txn(log, 7, epoch=3)
    old.send()
    raw, header = make_marker(7, 4, True, 0)  # EndTxn v5: the marker carries epoch + 1
    log.append_control(raw, header, now_ms=NOW)
    before = [(p.producer_id, p.producer_epoch) for p in log.producer_state.producers()]
    assert before == [(7, 4)]
    if clean:
        log.close()
    log = open_log(d, CFG)
    assert [(p.producer_id, p.producer_epoch) for p in log.producer_state.producers()] == before
    with pytest.raises(ProducerStateError) as fenced:
        Txn(log, 7, epoch=3).send()
    assert fenced.value.error_code == ErrorCode.invalid_producer_epoch
    Txn(log, 7, epoch=4).send()  # the new epoch starts at sequence 0
