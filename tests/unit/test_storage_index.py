from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.storage.index import IndexCorruptError, OffsetIndex, TimeIndex, read_last_time_entry
from oncelog.storage.txn_index import AbortedTxn, TransactionIndex, aborted_entry

from .test_storage_support import NOW, append, config, open_log, read_offsets

BASE = 1000


def test_offset_index_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", BASE)
    assert idx.lookup(BASE + 5) == 0
    for rel, pos in [(4, 100), (9, 250), (20, 600)]:
        idx.append(BASE + rel, pos)
    assert idx.lookup(BASE) == 0
    assert idx.lookup(BASE + 3) == 0
    assert idx.lookup(BASE + 4) == 100
    assert idx.lookup(BASE + 19) == 250
    assert idx.lookup(BASE + 10**6) == 600
    assert idx.floor_position(99) == 0
    assert idx.floor_position(250) == 250
    assert idx.floor_position(599) == 250
    assert idx.last_position == 600


def test_offset_index_file_layout_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(path, BASE)
    idx.append(BASE + 4, 100)
    idx.persist()
    idx.append(BASE + 9, 250)
    idx.persist(fsync=True)
    assert path.read_bytes() == struct.pack(">iiii", 4, 100, 9, 250)
    again = OffsetIndex(path, BASE)
    again.load(log_size=300)
    assert again.lookup(BASE + 9) == 250 and len(again) == 2
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, BASE).load(log_size=200)  # points past the log
    path.write_bytes(struct.pack(">iiii", 9, 100, 4, 250))
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, BASE).load(log_size=300)
    path.write_bytes(b"\x00" * 9)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, BASE).load(log_size=300)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "missing.index", BASE).load(log_size=300)


def test_reset_truncates_stale_file(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\x01" * 64)
    idx = OffsetIndex(path, BASE)  # new index: the old content is not ours
    idx.append(BASE, 0)
    idx.persist()
    assert path.read_bytes() == struct.pack(">ii", 0, 0)


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    idx = TimeIndex(path, BASE)
    assert idx.last_entry() == (-1, BASE)
    assert idx.lookup(NOW) == (-1, BASE)
    idx.maybe_append(NOW, BASE + 2)
    idx.maybe_append(NOW, BASE + 5)  # not greater: skipped
    idx.maybe_append(NOW + 10, BASE + 8)
    assert len(idx) == 2
    assert idx.lookup(NOW - 1) == (-1, BASE)
    assert idx.lookup(NOW + 9) == (NOW, BASE + 2)
    assert idx.lookup(NOW + 10) == (NOW + 10, BASE + 8)
    idx.persist()
    assert path.read_bytes() == struct.pack(">qiqi", NOW, 2, NOW + 10, 8)
    assert read_last_time_entry(path, BASE) == (NOW + 10, BASE + 8)
    again = TimeIndex(path, BASE)
    again.load()
    assert again.last_entry() == (NOW + 10, BASE + 8)
    path.write_bytes(struct.pack(">qiqi", NOW + 10, 2, NOW, 8))
    with pytest.raises(IndexCorruptError):
        TimeIndex(path, BASE).load()
    assert read_last_time_entry(tmp_path / "none", BASE) is None


def test_txn_index(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    idx = TransactionIndex(path, BASE)
    idx.reset()
    idx.append(AbortedTxn(1, 10, 20, 15))
    idx.append(AbortedTxn(2, 12, 30, 31))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(3, 12, 30, 31))
    assert os.path.getsize(path) == 2 * 34
    assert path.read_bytes()[:34] == struct.pack(">hqqqq", 0, 1, 10, 20, 15)
    again = TransactionIndex(path, BASE)
    again.load()
    assert again.entries == idx.entries
    assert again.collect(0, 11) == ([AbortedTxn(1, 10, 20, 15)], True)
    assert again.collect(0, 40) == (again.entries, False)
    # the first entry's LSO (15) covers an upper bound of 15: search complete
    assert again.collect(0, 15) == ([AbortedTxn(1, 10, 20, 15)], True)
    assert again.collect(21, 40) == ([AbortedTxn(2, 12, 30, 31)], False)
    assert again.truncate_to(30)
    assert not again.truncate_to(30)
    assert [t.producer_id for t in again.entries] == [1]
    assert os.path.getsize(path) == 34
    path.write_bytes(b"\x00\x01" + bytes(32))  # version 1
    with pytest.raises(IndexCorruptError):
        TransactionIndex(path, BASE).load()
    assert aborted_entry(5, 1, 9, None) == AbortedTxn(5, 1, 9, 10)
    assert aborted_entry(5, 1, 9, 3) == AbortedTxn(5, 1, 9, 3)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 200)), min_size=1, max_size=40),
    interval=st.sampled_from([0, 50, 300, 4096]),
    seg_bytes=st.sampled_from([1500, 4000, 100000]),
)
def test_every_offset_reads_back(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    interval: int,
    seg_bytes: int,
) -> None:
    d = tmp_path_factory.mktemp("prop") / "t-0"
    cfg = config(segment_bytes=seg_bytes, index_interval_bytes=interval)
    log = open_log(d, cfg)
    starts = []
    for i, (count, value) in enumerate(sizes):
        starts.append(append(log, count, value_size=value, tag=i, ts=NOW + i).base_offset)
    end = log.log_end_offset
    assert end == sum(c for c, _ in sizes)

    def check(log_: object) -> None:
        for offset in range(end):
            got = read_offsets(log_, offset)  # type: ignore[arg-type]
            assert got[0] <= offset <= got[-1]
            assert got[0] in starts
        for i, base in enumerate(starts):
            assert log_.offset_for_timestamp(NOW + i) == (base, NOW + i)  # type: ignore[attr-defined]

    check(log)
    log.close()
    check(open_log(d, cfg))
