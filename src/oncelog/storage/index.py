"""Sparse offset and time indexes of one segment, in Kafka's file layouts.

``.index``: relative offset i32 + file position i32 per entry; the offset is the
last offset of the batch that starts at that position (as Kafka indexes it).
``.timeindex``: timestamp i64 + relative offset i32; entries record the segment's
running max timestamp and the last offset of the batch that holds it.

Lookups use sorted in-memory arrays; files are appended to (never preallocated)
when the owner persists, so the active segment costs no syscall per append.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_BIG_ENDIAN = sys.byteorder == "big"

assert array("i").itemsize == 4 and array("q").itemsize == 8


def read_entries(path: Path, entry_size: int) -> bytes:
    """The raw entries of an index file; IndexCorruptError if missing or torn."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise IndexCorruptError(f"{path.name} is missing") from None
    # os-level reads, not Path.read_bytes: a start opens a txn index per partition
    # (20,000 at scale), nearly all empty, and the buffered file object costs more
    # than the syscalls.
    try:
        chunks = []
        if size := os.fstat(fd).st_size:  # an empty file (most txn indexes): no read
            while chunk := os.read(fd, size):
                chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) % entry_size:
        raise IndexCorruptError(f"{path.name} has a partial entry")
    return data


def raw_offset_entries(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """(offset, position) of every ``.index`` entry as written, unchecked (for
    kafka-dump-log.sh, which shows what is on disk); IndexCorruptError if torn."""
    data = read_entries(path, _OFFSET_ENTRY.size)
    return [(base_offset + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(data)]


def raw_time_entries(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, offset) of every ``.timeindex`` entry as written, unchecked."""
    data = read_entries(path, _TIME_ENTRY.size)
    return [(ts, base_offset + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data)]


class IndexCorruptError(Exception):
    """An index file that cannot be trusted; the segment rebuilds it from the log."""


def _be_int32_array(values: array) -> bytes:
    if _BIG_ENDIAN:
        return values.tobytes()
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return swapped.tobytes()


def _strictly_increasing(values: array) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))


class _IndexFile:
    """Persistence shared by both indexes: entries past ``_persisted`` are unwritten."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._persisted = 0
        self._rewrite = True  # the file's content is not ours yet: truncate on first persist

    def __len__(self) -> int:
        raise NotImplementedError

    def _encode(self, start: int) -> bytes:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        self._clear()
        self._persisted = 0
        self._rewrite = True

    def persist(self, *, fsync: bool = False) -> None:
        count = len(self)
        if not self._rewrite and self._persisted == count and not fsync:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
        if self._rewrite:
            flags |= os.O_TRUNC
        fd = os.open(self.path, flags, 0o644)
        try:
            start = 0 if self._rewrite else self._persisted
            if start < count:
                data = self._encode(start)
                written = 0
                while written < len(data):
                    written += os.pwrite(fd, data[written:], start * self.entry_size + written)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._persisted = count
        self._rewrite = False

    def take_unwritten(self) -> tuple[bool, int, bytes]:
        """(truncate, position, bytes) that ``persist`` would write, counted as written:
        for a rolled segment, whose indexes a background job writes (roll_flush.py)."""
        count = len(self)
        start = 0 if self._rewrite else self._persisted
        truncate = self._rewrite
        data = self._encode(start) if start < count else b""
        self._persisted = count
        self._rewrite = False
        return truncate, start * self.entry_size, data

    def remove_on_disk(self) -> None:
        """Delete the file now (its entries stay in memory, written whole by the next
        persist): a rolled segment's time index must not vouch for its log on disk
        before that log is fsynced, and a missing one makes recovery re-walk the
        segment (an empty one would vouch for an empty segment; see roll_flush.py)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._rewrite = True

    def _read_file(self) -> bytes:
        return read_entries(self.path, self.entry_size)

    def _loaded(self) -> None:
        self._persisted = len(self)
        self._rewrite = False


class OffsetIndex(_IndexFile):
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._offsets = array("i")  # relative to base_offset
        self._positions = array("i")

    def __len__(self) -> int:
        return len(self._offsets)

    def _clear(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")

    def append(self, offset: int, position: int) -> None:
        """Index the batch at ``position`` whose last offset is ``offset``."""
        self._offsets.append(offset - self.base_offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch with last offset <= ``offset`` (else 0)."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch start <= ``position`` (else 0)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    @property
    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def _encode(self, start: int) -> bytes:
        n = len(self._offsets) - start
        pairs = array("i", bytes(8 * n))
        pairs[0::2] = self._offsets[start:]
        pairs[1::2] = self._positions[start:]
        return _be_int32_array(pairs)

    def load(self, log_size: int) -> None:
        data = self._read_file()
        pairs = array("i")
        pairs.frombytes(data)
        if not _BIG_ENDIAN:
            pairs.byteswap()
        offsets, positions = pairs[0::2], pairs[1::2]
        if offsets and (offsets[0] < 0 or positions[0] < 0 or positions[-1] >= max(log_size, 1)):
            raise IndexCorruptError(f"{self.path.name} points outside its segment")
        if not (_strictly_increasing(offsets) and _strictly_increasing(positions)):
            raise IndexCorruptError(f"{self.path.name} entries are not increasing")
        self._offsets, self._positions = offsets, positions
        self._loaded()


class TimeIndex(_IndexFile):
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._timestamps = array("q")
        self._offsets = array("i")  # relative to base_offset

    def __len__(self) -> int:
        return len(self._timestamps)

    def _clear(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record a new running max (Kafka keeps only strictly increasing timestamps)."""
        if timestamp > self.last_entry()[0]:
            self._timestamps.append(timestamp)
            self._offsets.append(offset - self.base_offset)

    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self._offsets[-1] + self.base_offset

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, else (-1, base)."""
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i] + self.base_offset

    def _encode(self, start: int) -> bytes:
        out = bytearray(self.entry_size * (len(self._timestamps) - start))
        for k, i in enumerate(range(start, len(self._timestamps))):
            _TIME_ENTRY.pack_into(out, k * self.entry_size, self._timestamps[i], self._offsets[i])
        return bytes(out)

    def load(self) -> None:
        data = self._read_file()
        timestamps, offsets = array("q"), array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            timestamps.append(ts)
            offsets.append(rel)
        if offsets and offsets[0] < 0:
            raise IndexCorruptError(f"{self.path.name} has a negative offset")
        if not _strictly_increasing(timestamps) or any(
            a > b for a, b in zip(offsets, offsets[1:], strict=False)
        ):
            raise IndexCorruptError(f"{self.path.name} entries are not increasing")
        self._timestamps, self._offsets = timestamps, offsets
        self._loaded()


_EMPTY = ()


def _read_last_entry(path: Path, entry: struct.Struct) -> tuple[int, ...] | None:
    """The final entry of an index file, ``()`` if the file is empty, None if it is
    missing or torn; one small pread, not the whole file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size % entry.size:
            return None
        if size == 0:
            return _EMPTY
        data = os.pread(fd, entry.size, size - entry.size)
    finally:
        os.close(fd)
    return entry.unpack(data) if len(data) == entry.size else None


def read_last_time_entry(path: Path, base_offset: int) -> tuple[int, int] | None:
    """The final (timestamp, offset) of a time index file without loading it all:
    ``(-1, base_offset)`` if it is empty, None if it is missing or torn (the caller
    then rebuilds the segment's indexes)."""
    last = _read_last_entry(path, _TIME_ENTRY)
    if last is None:
        return None
    if not last:
        return -1, base_offset
    ts, rel = last
    return ts, base_offset + rel


def read_last_offset_entry(path: Path, base_offset: int) -> tuple[int, int] | None:
    """The final (offset, position) of an offset index file without loading it all:
    ``(base_offset - 1, 0)`` if it is empty, None if it is missing, torn or negative."""
    last = _read_last_entry(path, _OFFSET_ENTRY)
    if last is None:
        return None
    if not last:
        return base_offset - 1, 0
    rel, position = last
    if rel < 0 or position < 0:
        return None
    return base_offset + rel, position
