"""Index files for `oncelog dump-log`, as Kafka's ``DumpLogSegments`` shows them: every
entry of a segment's ``.index`` (offset, position), ``.timeindex`` (timestamp, offset)
and ``.txnindex`` (aborted transactions), each checked against the segment's ``.log``.

The checks are Kafka's: an offset index entry must point at a batch whose last offset
is the entry's offset; a time index entry must name a batch's last offset, carry that
batch's max timestamp, and grow. ``verify_only`` (``--verify-index-only``) prints the
problems without the entries. Problems go to stderr, in Kafka's words; like Kafka the
tool still exits 0, it reports rather than judges.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oncelog.storage.index import IndexCorruptError, raw_offset_entries, raw_time_entries
from oncelog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from oncelog.storage.txn_index import raw_entries

INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class IndexDump:
    """One index file's entries (as printed) and the problems found in it."""

    file: str
    kind: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    note: str | None = None  # "is empty." and the like, printed instead of entries

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "kind": self.kind, "entries": self.entries}
        out["problems"] = self.problems
        if self.note is not None:
            out["note"] = self.note
        return out

    def lines(self, verify_only: bool) -> list[str]:
        out = [f"Dumping {self.file}"]
        if self.note is not None:
            out.append(f"{self.file} {self.note}")
        elif not verify_only:
            out += [" ".join(f"{k}: {v}" for k, v in e.items()) for e in self.entries]
        return out


SegmentReader = Callable[[Path], list[dict[str, Any]]]
"""A segment file -> its batches as ``dump-log`` reads them (``position``,
``last_offset``, ``max_timestamp``, ...), up to the first unreadable one."""


def _segment_batches(index: Path, read_segment: SegmentReader) -> list[dict[str, Any]] | None:
    """The batches of the ``.log`` next to an index file (None when there is none)."""
    try:
        return read_segment(index.with_name(index.name[: -len(index.suffix)] + LOG_SUFFIX))
    except FileNotFoundError:
        return None


def _base_offset(path: Path) -> int:
    stem = path.name[: -len(path.suffix)]
    return int(stem) if stem.isdigit() else 0


def dump_index(path: Path, read_segment: SegmentReader) -> IndexDump:
    """Read and check one index file (its suffix says which kind) against its segment,
    read with ``read_segment``."""
    kind = path.suffix
    dump = IndexDump(str(path), kind.lstrip("."))
    base = _base_offset(path)
    try:
        if kind == INDEX_SUFFIX:
            _offset_index(dump, path, base, read_segment)
        elif kind == TIME_INDEX_SUFFIX:
            _time_index(dump, path, base, read_segment)
        else:
            _txn_index(dump, path)
    except IndexCorruptError as exc:
        dump.problems.append(f"{exc}: the broker rebuilds this index from the log at start")
    return dump


def _offset_index(dump: IndexDump, path: Path, base: int, read_segment: SegmentReader) -> None:
    entries = raw_offset_entries(path, base)
    if not entries:
        dump.note = "is empty."
        return
    batches = _segment_batches(path, read_segment)
    at = {b["position"]: b for b in batches or ()}
    mismatches = []
    for i, (offset, position) in enumerate(entries):
        # A sparse file after a crash may end in zero entries: stop at one (as Kafka).
        if offset == base and i > 0:
            break
        dump.entries.append({"offset": offset, "position": position})
        if batches is None:
            continue
        batch = at.get(position)
        found = -1 if batch is None else batch["last_offset"]
        if found != offset:
            mismatches.append(f"  Index offset: {offset}, log offset: {found}")
    if batches is None:
        dump.problems.append(f"no {LOG_SUFFIX} segment next to {path.name}: entries not checked")
    elif mismatches:
        dump.problems += [f"Mismatches in :{path.resolve()}", *mismatches]


def _time_index(dump: IndexDump, path: Path, base: int, read_segment: SegmentReader) -> None:
    entries = raw_time_entries(path, base)
    if not entries:
        dump.note = "is empty."
        return
    batches = _segment_batches(path, read_segment)
    last_offsets = [b["last_offset"] for b in batches or ()]
    mismatched: list[str] = []
    out_of_order: list[str] = []
    not_found: list[str] = []
    previous = -1
    for i, (timestamp, offset) in enumerate(entries):
        if offset == base and i > 0:
            break
        dump.entries.append({"timestamp": timestamp, "offset": offset})
        if batches is not None:
            k = bisect_left(last_offsets, offset)
            if k == len(batches):
                not_found.append(f"Indexed offset: {offset}, found log offset: -1")
            elif (found := batches[k])["last_offset"] != offset:
                not_found.append(
                    f"Indexed offset: {offset}, found log offset: {found['last_offset']}"
                )
            else:
                if found["max_timestamp"] != timestamp:
                    mismatched.append(
                        f"  Index timestamp: {timestamp}, log timestamp: {found['max_timestamp']}"
                    )
                if previous >= timestamp:
                    out_of_order.append(
                        f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}"
                    )
        previous = timestamp
    if batches is None:
        dump.problems.append(f"no {LOG_SUFFIX} segment next to {path.name}: entries not checked")
        return
    where = str(path.resolve())
    if mismatched:
        dump.problems += [f"Found timestamp mismatch in :{where}", *mismatched]
    if out_of_order:
        dump.problems += [f"Found out of order timestamp in :{where}", *out_of_order]
    if not_found:
        dump.problems += ["The following indexed offsets are not found in the log.", *not_found]


def _txn_index(dump: IndexDump, path: Path) -> None:
    for version, txn in raw_entries(path):
        dump.entries.append(
            {
                "version": version,
                "producerId": txn.producer_id,
                "firstOffset": txn.first_offset,
                "lastOffset": txn.last_offset,
                "lastStableOffset": txn.last_stable_offset,
            }
        )
    if not dump.entries:
        dump.note = "is empty."
