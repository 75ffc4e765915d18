"""Finding a fetch's byte range without waiting for the disk: ``pread_cached`` and
``UnifiedLog.read(cached_only=True)`` raise ``NotCachedError`` where a plain read would
block on evicted pages, and otherwise return exactly what the plain read returns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.pread import NotCachedError, pread_cached
from oncelog.storage.segment import LOG_SUFFIX
from oncelog.storage.unified_log import UnifiedLog
from oncelog.testing.faults import evict_file_pages

from .test_storage_support import append, config, open_log

MB = 1 << 20


def test_pread_cached_refuses_evicted_pages_and_reads_cached_ones(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = os.urandom(2 * MB)
    path.write_bytes(data)
    evict_file_pages(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(NotCachedError):
            pread_cached(fd, 16_384, MB)
        assert os.pread(fd, 16_384, MB) == data[MB : MB + 16_384]  # the plain read waits
        assert pread_cached(fd, 16_384, MB) == data[MB : MB + 16_384]
        os.pread(fd, 100, 2 * MB - 100)
        assert pread_cached(fd, 4096, 2 * MB - 100) == data[-100:]  # short at the end
        assert pread_cached(fd, 10, 2 * MB) == b""
    finally:
        os.close(fd)


def segment_log(log: UnifiedLog) -> Path:
    return log.segments[-1].path(LOG_SUFFIX)


def filled(path: Path) -> UnifiedLog:
    log = open_log(path, config(index_interval_bytes=4096))
    for i in range(400):
        append(log, 4, value_size=1000, tag=i)  # ~4 KB batches: ~1.6 MB, ~400 index entries
    return log


def test_a_cold_segment_is_refused_then_read_like_the_plain_read(tmp_path: Path) -> None:
    log = filled(tmp_path / "t-0")
    for offset, max_bytes in ((0, MB), (801, 64_000), (1203, 10 * MB), (1599, 1)):
        # Evicted before each case: the previous plain read's readahead may have brought
        # this case's pages in.
        evict_file_pages(segment_log(log))
        with pytest.raises(NotCachedError):
            log.read(offset, max_bytes, cached_only=True)
        plain = log.read(offset, max_bytes)
        assert plain is not None
        # The plain read brought the pages in: now the cached-only read gives the same.
        again = log.read(offset, max_bytes, cached_only=True)
        assert again is not None
        assert (again.position, again.length) == (plain.position, plain.length)
    log.close()


def test_a_segment_whose_indexes_are_not_loaded_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    filled(d).close()
    log = UnifiedLog.open(d, CFG_INDEXED, now_ms=1_700_000_000_000)
    with pytest.raises(NotCachedError):
        log.read(10, MB, cached_only=True)
    plain = log.read(10, MB)
    again = log.read(10, MB, cached_only=True)
    assert plain is not None and again is not None
    assert (again.position, again.length) == (plain.position, plain.length)
    log.close()


CFG_INDEXED = config(index_interval_bytes=4096)


def test_warming_what_was_refused_lets_the_cached_read_succeed(tmp_path: Path) -> None:
    """The page-read thread's loop: warm each refused piece (outside the log's lock),
    retry, until the plan is made from cached pages."""
    log = filled(tmp_path / "t-0")
    plain = log.read(900, 200_000)
    assert plain is not None
    evict_file_pages(segment_log(log))
    rounds = 0
    while True:
        try:
            got = log.read(900, 200_000, cached_only=True)
            break
        except NotCachedError as exc:
            assert exc.warm()
            rounds += 1
            assert rounds < 16
    assert rounds >= 1
    assert got is not None and (got.position, got.length) == (plain.position, plain.length)
    log.close()
