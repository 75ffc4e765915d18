"""One log segment: ``<base offset>.log`` plus its offset, time and txn indexes.

The log file is a plain sequence of v2 batches written with one pwrite each;
the segment keeps its size, next offset and max timestamp in memory so the
append path never reads the file. Indexes of older segments load lazily on
first lookup (most are never read again) and are rebuilt from the log if bad.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from oncelog.pread import NotCachedError, pread_cached
from oncelog.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    parse_header,
    validate_batch,
)

from .config import LogConfig
from .index import (
    IndexCorruptError,
    OffsetIndex,
    TimeIndex,
    read_last_offset_entry,
    read_last_time_entry,
)
from .record_scan import first_record_at_or_after, first_record_with_timestamp
from .roll_flush import FileWrite
from .txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_SCAN_CHUNK = 16 * 1024
_RECOVERY_CHUNK = 4 * 1024 * 1024
_INT32_MAX = (1 << 31) - 1


def offset_file_name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def parse_offset_file_name(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], position + done)


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        size: int,
        *,
        now_ms: int,
        config: LogConfig,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        # The log file's descriptor opens on first use and idle segments give it back
        # (``release_fd``): 20,000 partitions must not hold 20,000 descriptors.
        self._fd = fd
        self._closed = False
        self.size = size
        self.next_offset = base_offset  # one past the last offset stored here
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # last offset of the batch holding max_timestamp
        self.rolling_base_ms = now_ms  # segment.ms counts from here
        self.deleted = False
        self._deleted_suffix = DELETED_SUFFIX
        self.configure(config)
        self.offset_index = OffsetIndex(self.path(INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX), base_offset)
        self.txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX), base_offset)
        self._indexes_loaded = False
        self._bytes_since_index = 0

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, now_ms: int, config: LogConfig
    ) -> LogSegment:
        path = directory / offset_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if os.fstat(fd).st_size:
            os.close(fd)
            raise FileExistsError(f"segment {path} already holds data")
        os.close(fd)  # reopened on first use
        seg = cls(directory, base_offset, -1, 0, now_ms=now_ms, config=config)
        seg._indexes_loaded = True
        # Empty index files from the start: a missing one later means damage.
        seg.offset_index.persist()
        seg.time_index.persist()
        seg.txn_index.reset()
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, *, now_ms: int, config: LogConfig
    ) -> LogSegment:
        size = os.stat(directory / offset_file_name(base_offset, LOG_SUFFIX)).st_size
        return cls(directory, base_offset, -1, size, now_ms=now_ms, config=config)

    def path(self, suffix: str) -> Path:
        name = offset_file_name(self.base_offset, suffix)
        return self.directory / (name + self._deleted_suffix if self.deleted else name)

    @property
    def fd(self) -> int:
        """The log file's descriptor, opened on first use (-1 once closed)."""
        if self._fd < 0 and not self._closed:
            self._fd = os.open(self.path(LOG_SUFFIX), os.O_RDWR | os.O_CLOEXEC)
        return self._fd

    def release_fd(self) -> None:
        """Give the descriptor back until the next use (an idle segment after open)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        self._closed = True
        self.release_fd()

    def mark_deleted(self) -> None:
        """Rename the files to ``*.deleted``; the fd stays open for in-flight reads."""
        old = {suffix: self.path(suffix) for suffix in SEGMENT_SUFFIXES}
        self.deleted = True
        # The cleaner can replace a segment by one with the same base offset, and that one
        # can be replaced again before file.delete.delay.ms frees the first: a plain
        # ``*.deleted`` name would overwrite the pending one, whose delayed unlink would then
        # remove the newer files early. A numbered suffix keeps each pending set apart;
        # it still ends in ``.deleted`` so recovery removes it.
        generation = 0
        while any(self.path(suffix).exists() for suffix in SEGMENT_SUFFIXES):
            generation += 1
            self._deleted_suffix = f".{generation}{DELETED_SUFFIX}"
        for suffix, path in old.items():
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, self.path(suffix))

    def delete_files(self) -> None:
        self.close()
        for suffix in SEGMENT_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(suffix))

    def configure(self, config: LogConfig) -> None:
        """Take the index sizing of ``config`` (on creation, and when the topic's config changes)."""
        self.index_interval_bytes = config.index_interval_bytes
        self.segment_index_bytes = config.segment_index_bytes

    # -- writes ------------------------------------------------------------------------

    def index_full(self) -> bool:
        self.ensure_indexes()
        return (
            len(self.offset_index) >= self.segment_index_bytes // OffsetIndex.entry_size
            or len(self.time_index) >= self.segment_index_bytes // TimeIndex.entry_size
        )

    def fits_relative(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= _INT32_MAX

    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
    ) -> None:
        """Write one batch (offsets already assigned) at the end of the file."""
        if not self._indexes_loaded:  # the first append to a lazily opened segment
            self.ensure_indexes()
        position = self.size
        try:
            _pwrite_all(self.fd, data, position)
        except OSError:
            # Leave no partial batch behind (e.g. ENOSPC), so the log stays parseable.
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
            raise
        if position == 0:
            self.rolling_base_ms = now_ms
        self._index_batch(position, last_offset, max_timestamp, len(data))
        self.size = position + len(data)
        self.next_offset = last_offset + 1

    def _index_batch(self, position: int, last_offset: int, max_timestamp: int, size: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        # Same cadence as Kafka: an entry once more than index.interval.bytes went by.
        if self._bytes_since_index > self.index_interval_bytes:
            if len(self.offset_index) < self.segment_index_bytes // OffsetIndex.entry_size:
                self.offset_index.append(last_offset, position)
            if len(self.time_index) < self.segment_index_bytes // TimeIndex.entry_size:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def fsync_log(self) -> None:
        os.fsync(self.fd)

    def flush(self, *, fsync_indexes: bool = False) -> None:
        """fsync the log and write out the index tails."""
        os.fsync(self.fd)
        self.persist_indexes(fsync=fsync_indexes)

    def persist_indexes(self, *, fsync: bool = False) -> None:
        if self._indexes_loaded:
            self.offset_index.persist(fsync=fsync)
            self.time_index.persist(fsync=fsync)
        if fsync:
            self.txn_index.sync()

    def seal_time_index(self) -> None:
        """Make the time index's last entry the segment max: for an inactive segment
        that entry is all open() reads back for retention."""
        self.ensure_indexes()
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def detach_for_roll_flush(self) -> tuple[tuple[FileWrite, ...], tuple[str, ...]]:
        """This segment stops being the active one: seal its time index, delete that file
        until the log is fsynced, and hand over what a background job must write (the
        index files, the time index last) and fsync (the txn index). See roll_flush.py."""
        self.seal_time_index()
        self.time_index.remove_on_disk()
        writes = []
        for index in (self.offset_index, self.time_index):
            truncate, position, data = index.take_unwritten()
            writes.append(FileWrite(index.path.name, position, data, truncate))
        fsyncs = (self.txn_index.path.name,) if self.txn_index.take_fsync_need() else ()
        return tuple(writes), fsyncs

    # -- reads -------------------------------------------------------------------------

    def pread(self, position: int, size: int) -> bytes:
        parts = []
        while size > 0:
            chunk = os.pread(self.fd, size, position)
            if not chunk:
                break
            parts.append(chunk)
            position += len(chunk)
            size -= len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def scan(
        self, start: int, end: int | None = None, *, cached_only: bool = False
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of consecutive batches from ``start``, headers only.
        ``cached_only``: raise ``NotCachedError`` rather than wait for the disk."""
        end = self.size if end is None else end
        pos, buf, buf_start = start, b"", start
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                size = min(_SCAN_CHUNK, end - pos)
                chunk = pread_cached(self.fd, size, pos) if cached_only else self.pread(pos, size)
                buf, buf_start, off = chunk, pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = parse_header(buf, off)
            if header.batch_length < _MIN_BATCH_LENGTH or pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def _indexes_for(self, cached_only: bool) -> None:
        if not self._indexes_loaded:
            if cached_only:
                raise NotCachedError(f"indexes of segment {self.base_offset} are not loaded")
            self.ensure_indexes()

    def ensure_indexes(self) -> None:
        if self._indexes_loaded:
            return
        try:
            self.offset_index.load(self.size)
            self.time_index.load()
        except IndexCorruptError:
            self.rebuild_indexes()
        self._indexes_loaded = True

    def rebuild_indexes(self) -> None:
        """Re-derive offset/time indexes from batch headers (no CRC: the data was checked)."""
        self._reset_indexes()
        for pos, header in self.scan(0):
            self._index_batch(pos, header.last_offset, header.max_timestamp, header.size)
        self.seal_time_index()  # the max as last entry: what a later open reads back
        self._indexes_loaded = True
        with contextlib.suppress(OSError):
            self.persist_indexes()

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._indexes_loaded = True  # empty and authoritative: re-derived from here
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0

    def find_batch(
        self, offset: int, *, cached_only: bool = False
    ) -> tuple[int, BatchHeader] | None:
        """The batch holding ``offset`` (or the first one after it), via the index.
        ``cached_only``: raise ``NotCachedError`` rather than wait for the disk (an index
        not loaded yet counts as not cached)."""
        self._indexes_for(cached_only)
        for pos, header in self.scan(self.offset_index.lookup(offset), cached_only=cached_only):
            if header.last_offset >= offset:
                return pos, header
        return None

    def last_boundary_within(self, start: int, limit: int, *, cached_only: bool = False) -> int:
        """End of the last whole batch in [start, limit] (``start`` if none fits)."""
        self._indexes_for(cached_only)
        begin = max(start, self.offset_index.floor_position(limit))
        end = begin
        for pos, header in self.scan(begin, limit, cached_only=cached_only):
            end = pos + header.size
        return end

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        self.ensure_indexes()
        _, indexed_offset = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(indexed_offset, min_offset))
        for pos, header in self.scan(start):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                found = first_record_at_or_after(
                    self.pread(pos, header.size), header, timestamp, min_offset
                )
                if found is not None:
                    return found
        return None

    def max_timestamp_record_offset(self) -> int:
        """Offset of the first record carrying this segment's max timestamp."""
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is None:
            return self.offset_of_max_timestamp
        pos, header = found
        return first_record_with_timestamp(self.pread(pos, header.size), header, self.max_timestamp)

    def largest_timestamp(self) -> int:
        """What retention.ms compares: the max timestamp, else the file's mtime (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        # stat by path while idle: retention must not open every partition's file
        st = os.fstat(self._fd) if self._fd >= 0 else os.stat(self.path(LOG_SUFFIX))
        return st.st_mtime_ns // 1_000_000

    # -- loading and recovery ------------------------------------------------------------

    def index_files_ok(self) -> bool:
        """Cheap check at open: both index files exist and hold whole entries."""
        for suffix, entry in ((INDEX_SUFFIX, 8), (TIME_INDEX_SUFFIX, 12)):
            try:
                if os.stat(self.path(suffix)).st_size % entry:
                    return False
            except FileNotFoundError:
                return False
        return True

    def load_summary(self) -> bool:
        """Max timestamp of an older segment from its time index's last entry."""
        last = read_last_time_entry(self.time_index.path, self.base_offset)
        if last is None:
            return False
        self.max_timestamp, self.offset_of_max_timestamp = last
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = -1
        return True

    def load_clean(self) -> bool:
        """Active segment after a clean shutdown: trust the indexes, scan only the log's
        tail past the offset index's last entry.

        Only the last entry of each index is read here; the indexes themselves load on
        first use (``ensure_indexes``, as Kafka's LazyIndex), so thousands of idle
        partitions cost one small pread per index at start-up. An index found corrupt
        then is rebuilt from the log at that point.
        """
        last_indexed = read_last_offset_entry(self.offset_index.path, self.base_offset)
        last_time = read_last_time_entry(self.time_index.path, self.base_offset)
        if last_indexed is None or last_time is None:
            return False
        indexed_offset, start = last_indexed
        if start >= max(self.size, 1) and not (start == 0 and self.size == 0):
            return False
        self.max_timestamp, self.offset_of_max_timestamp = last_time
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = -1
        end = start
        expected = self.base_offset if start == 0 else None
        for pos, header in self.scan(start):
            if expected is not None and header.base_offset != expected:
                return False
            if pos == start and start > 0 and header.last_offset != indexed_offset:
                return False  # the entry does not point at the batch it names
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            expected, end = header.next_offset, pos + header.size
        if end != self.size:
            return False
        self.next_offset = self.base_offset if expected is None else expected
        self._bytes_since_index = self.size - start
        self._set_rolling_base()
        return True

    def recover(self) -> int:
        """Validate every batch (CRC-32C, contiguous offsets from the base) and cut the
        file at the first torn or corrupt one; rebuild offset/time indexes on the way.

        Returns the number of bytes truncated.
        """
        self._reset_indexes()
        expected = self.base_offset
        pos, buf, buf_start = 0, memoryview(b""), 0
        while pos < self.size:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = self._chunk(pos, HEADER_SIZE), pos, 0
                if len(buf) < HEADER_SIZE:
                    break
            header = parse_header(buf, off)
            if header.batch_length < _MIN_BATCH_LENGTH or pos + header.size > self.size:
                break
            if off + header.size > len(buf):
                buf, buf_start, off = self._chunk(pos, header.size), pos, 0
            try:
                validate_batch(buf, off)
            except CorruptRecordError:
                break
            # baseOffset lies outside the CRC, so check it against the running offset.
            if header.base_offset != expected or not self.fits_relative(header.last_offset):
                break
            self._index_batch(pos, header.last_offset, header.max_timestamp, header.size)
            expected = header.next_offset
            pos += header.size
        truncated = self.size - pos
        if truncated:
            os.ftruncate(self.fd, pos)
            self.size = pos
        self.next_offset = expected
        self._indexes_loaded = True
        self._set_rolling_base()
        return truncated

    def _chunk(self, position: int, need: int) -> memoryview:
        return memoryview(
            self.pread(position, min(self.size - position, max(need, _RECOVERY_CHUNK)))
        )

    def _set_rolling_base(self) -> None:
        # The first append time is not on disk; Kafka's stand-in is the first batch's timestamp.
        if self.size >= HEADER_SIZE:
            first = parse_header(self.pread(0, HEADER_SIZE))
            if 0 <= first.max_timestamp < self.rolling_base_ms:
                self.rolling_base_ms = first.max_timestamp
