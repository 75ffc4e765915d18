"""Aborted-transaction index of one segment (Kafka's ``.txnindex``).

Each 34-byte entry: version i16 (0), producerId i64, firstOffset i64,
lastOffset i64 (the abort marker), lastStableOffset i64 (the LSO right after
the abort). Entries are appended in marker order, so lastOffset increases.
Aborts are rare, so each entry is written through immediately; fsync waits
for the owner's flush (recovery re-derives any entry lost in a crash).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .index import IndexCorruptError, read_entries

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def raw_entries(path: Path) -> list[tuple[int, AbortedTxn]]:
    """(version, aborted transaction) of every entry as written, unchecked (for
    kafka-dump-log.sh); IndexCorruptError if torn."""
    data = read_entries(path, _ENTRY.size)
    return [
        (version, AbortedTxn(pid, first, last, lso))
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data)
    ]


class TransactionIndex:
    entry_size = _ENTRY.size

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._needs_fsync = False

    def __len__(self) -> int:
        return len(self.entries)

    def load(self) -> None:
        data = read_entries(self.path, _ENTRY.size)
        entries: list[AbortedTxn] = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != VERSION or first > last:
                raise IndexCorruptError(f"{self.path.name} has an invalid entry")
            if entries and last <= entries[-1].last_offset:
                raise IndexCorruptError(f"{self.path.name} entries are out of order")
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted txn at {txn.last_offset} is not after {self.entries[-1].last_offset}"
            )
        self.entries.append(txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, _encode(txn))
        finally:
            os.close(fd)
        self._needs_fsync = True

    def truncate_to(self, offset: int) -> bool:
        """Drop entries whose marker is at or after ``offset``; True if any were."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) == len(self.entries):
            return False
        self.entries = keep
        self.rewrite()
        return True

    def reset(self) -> None:
        self.entries = []
        self.rewrite()

    def rewrite(self) -> None:
        data = b"".join(_encode(t) for t in self.entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._needs_fsync = True

    def sync(self) -> None:
        if not self._needs_fsync:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._needs_fsync = False

    def take_fsync_need(self) -> bool:
        """Whether the file has unsynced writes, counted as synced: for a rolled
        segment, whose files a background job fsyncs (roll_flush.py)."""
        need, self._needs_fsync = self._needs_fsync, False
        return need

    def collect(self, start_offset: int, end_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted txns overlapping [start, end) and whether later segments can add more.

        Kafka's rule: once an entry's lastStableOffset reaches ``end``, every txn
        that could overlap the range was already open before it, so the search is done.
        """
        found: list[AbortedTxn] = []
        for txn in self.entries:
            if txn.last_offset >= start_offset and txn.first_offset < end_offset:
                found.append(txn)
            if txn.last_stable_offset >= end_offset:
                return found, True
        return found, False


def _encode(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )


def aborted_entry(
    producer_id: int, first_offset: int, last_offset: int, first_unstable_offset: int | None
) -> AbortedTxn:
    """The index entry for an abort; ``first_unstable_offset`` is taken after the txn
    completed, so the LSO is the next open txn's start, else just past the marker."""
    lso = last_offset + 1 if first_unstable_offset is None else first_unstable_offset
    return AbortedTxn(producer_id, first_offset, last_offset, lso)
