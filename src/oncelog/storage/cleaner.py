"""One compaction pass over a log's old segments (the rules of Kafka's Cleaner).

Input is a ``CleaningPlan``: read-only descriptors of the segments from the log
start up to the first uncleanable offset (never the active segment, never at or
past the last stable offset), plus the log's aborted transactions and the last
data batch of each live producer. The pass

1. maps every key of the dirty range ``[first_dirty, end)`` to its latest offset
   (records of aborted transactions do not count), stopping early if the dedupe
   buffer fills, which lowers ``end``;
2. rewrites every segment below ``end``, in groups that fit one segment, into
   ``<base>.log.cleaned`` with fresh offset, time and transaction indexes.

What survives a rewrite:
* a keyed record whose offset is its key's latest (or at/after ``end``), unless it
  is a tombstone whose batch's delete horizon has passed (KIP-534: the first
  pass that keeps a tombstone stamps ``now + delete.retention.ms`` into the
  batch as its base timestamp, with the delete-horizon attribute);
* nothing of an aborted transaction's data;
* a COMMIT/ABORT marker, until a pass finds no record of its transaction left;
  such a marker is then stamped with a horizon and removed by a later pass;
* the last batch of every live producer, emptied of records if need be, so its
  sequence numbers and epoch survive a replay of the log (idempotence).
Kept batches keep their base and last offsets, producer id/epoch/sequence and
codec; a batch that lost records is re-encoded (record deltas, CRC).

Pure file work: no locks, no clock, no broker. The caller swaps each cleaned
group in (see segment_swap.py) and owns the descriptors in the plan.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.records.batch import (
    CONTROL_MASK,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    OFFSET_ATTRIBUTES,
    OFFSET_CRC,
    OFFSET_MAX_TIMESTAMP,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    compute_crc,
    parse_header,
)
from oncelog.records.builder import build_batch
from oncelog.records.compression import decompress
from oncelog.records.control import ControlRecordType, parse_control_record
from oncelog.records.record import Record, decode_fields

from .fsutil import fsync_dir
from .index import OffsetIndex, TimeIndex
from .offset_map import OffsetMap
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .segment import offset_file_name as _name
from .txn_index import AbortedTxn, TransactionIndex

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
RANGE_SUFFIX = ".range"  # "<base> <end>": the offsets a swap file replaces

_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20
_INT32_MAX = (1 << 31) - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_OFFSET_LAST_DELTA = 23


class CleanerError(Exception):
    """The pass cannot go on (unreadable data, dedupe buffer too small)."""


@dataclass(frozen=True, slots=True)
class SourceSegment:
    base_offset: int
    end_offset: int  # the next segment's base: every offset stored here is below it
    size: int
    fd: int  # a private descriptor the caller closes


@dataclass(frozen=True, slots=True)
class ProducerTail:
    """A live producer's last data batch (its last offset, -1 if none) and epoch."""

    last_data_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    directory: Path
    segments: tuple[SourceSegment, ...]  # contiguous, from the log start, all below end_offset
    first_dirty_offset: int
    end_offset: int  # first uncleanable offset
    aborted: tuple[AbortedTxn, ...]
    producers: Mapping[int, ProducerTail]
    delete_retention_ms: int
    now_ms: int
    max_segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    dedupe_buffer_bytes: int


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """A group rewritten into ``<base>.*.cleaned``: it replaces [base, end)."""

    base_offset: int
    end_offset: int
    source_bases: tuple[int, ...]
    size: int


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    batches_removed: int = 0
    map_end_offset: int = -1  # the dirty range cleaned this pass ends here
    pending_horizon: int | None = None  # earliest delete horizon still ahead of us


Pace = Callable[[int], None]  # told the bytes processed; throttles, or raises to abort


def _no_pace(_: int) -> None:
    pass


# -- reading ----------------------------------------------------------------------------


def iter_segment_batches(fd: int, size: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, bytes) of each whole batch of a segment file, read in large chunks."""
    pos = 0
    while size - pos >= HEADER_SIZE:
        chunk = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
        view = memoryview(chunk)
        off = 0
        while len(view) - off >= HEADER_SIZE:
            header = parse_header(view, off)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptRecordError(f"bad batch length at position {pos + off}")
            if off + header.size > len(view):
                if off == 0:  # a batch larger than the chunk
                    big = os.pread(fd, header.size, pos)
                    if len(big) < header.size:
                        return
                    yield header, memoryview(big)
                    off = header.size
                break
            yield header, view[off : off + header.size]
            off += header.size
        if off == 0:
            return
        pos += off


def _iter_records(batch: memoryview, header: BatchHeader) -> Iterator[Record]:
    body = batch[HEADER_SIZE:]
    data = decompress(header.compression, body) if header.compression else body
    p = 0
    for _ in range(header.records_count):
        off_delta, ts_delta, key, value, headers, p = decode_fields(data, p)
        yield Record(off_delta, ts_delta, key, value, headers)


def _horizon(header: BatchHeader) -> int | None:
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


# -- the pass ---------------------------------------------------------------------------


class _Aborted:
    """Which data batches belong to aborted transactions (from the txn indexes)."""

    def __init__(self, aborted: tuple[AbortedTxn, ...]) -> None:
        self._by_pid: dict[int, list[AbortedTxn]] = {}
        self.by_marker: dict[int, AbortedTxn] = {}
        for txn in aborted:
            self._by_pid.setdefault(txn.producer_id, []).append(txn)
            self.by_marker[txn.last_offset] = txn

    def contains(self, header: BatchHeader) -> bool:
        if not header.is_transactional:
            return False
        for txn in self._by_pid.get(header.producer_id, ()):
            if txn.first_offset <= header.base_offset <= txn.last_offset:
                return True
        return False


def build_offset_map(plan: CleaningPlan, omap: OffsetMap, pace: Pace = _no_pace) -> int:
    """Fill ``omap`` from the dirty range; returns where the mapped range ends."""
    aborted = _Aborted(plan.aborted)
    for seg in plan.segments:
        if seg.end_offset <= plan.first_dirty_offset:
            continue
        for header, batch in iter_segment_batches(seg.fd, seg.size):
            if header.last_offset < plan.first_dirty_offset:
                continue
            if header.base_offset >= plan.end_offset:
                return plan.end_offset
            pace(header.size)
            if header.is_control or aborted.contains(header):
                continue
            if omap.free < header.records_count:
                if header.base_offset <= plan.first_dirty_offset:
                    raise CleanerError(
                        "log.cleaner.dedupe.buffer.size is too small for one batch "
                        f"({header.records_count} records)"
                    )
                return header.base_offset
            for record in _iter_records(batch, header):
                offset = header.base_offset + record.offset_delta
                if record.key is not None and offset < plan.end_offset:
                    omap.put(record.key, offset)
    return plan.end_offset


def group_segments(
    segments: tuple[SourceSegment, ...], max_bytes: int
) -> list[list[SourceSegment]]:
    """Consecutive segments whose total size fits one segment (and int32 offsets)."""
    groups: list[list[SourceSegment]] = []
    for seg in segments:
        if groups:
            group = groups[-1]
            total = sum(s.size for s in group)
            if (
                total + seg.size <= max_bytes
                and seg.end_offset - 1 - group[0].base_offset <= _INT32_MAX
            ):
                group.append(seg)
                continue
        groups.append([seg])
    return groups


def clean(
    plan: CleaningPlan, stats: CleanerStats | None = None, pace: Pace = _no_pace
) -> Generator[CleanedSegment, None, None]:
    """Run the pass, yielding each group once its ``.cleaned`` files are durable.

    The caller swaps a group in before resuming the generator, so at most one
    group's worth of extra disk space is in use.
    """
    stats = stats if stats is not None else CleanerStats()
    omap = OffsetMap(plan.dedupe_buffer_bytes)
    end = build_offset_map(plan, omap, pace)
    stats.map_end_offset = end
    writer = _GroupCleaner(plan, omap, end, stats, pace)
    todo = tuple(s for s in plan.segments if s.base_offset < end)
    for group in group_segments(todo, plan.max_segment_bytes):
        yield writer.write_group(group)


@dataclass(slots=True)
class _TxnTracker:
    """Whether a transaction's data was seen in this pass (decides its marker's fate)."""

    aborted: _Aborted
    seen: dict[int, bool] = field(default_factory=dict)

    def on_data(self, header: BatchHeader) -> bool:
        """Record a data batch; True if its records are to be discarded (aborted txn)."""
        if header.is_transactional:
            self.seen[header.producer_id] = True
        return self.aborted.contains(header)

    def on_marker(
        self, header: BatchHeader, marker_type: ControlRecordType
    ) -> tuple[bool, AbortedTxn | None]:
        """(marker may go once its horizon passed, index entry to keep for it)."""
        seen = self.seen.pop(header.producer_id, False)
        if marker_type == ControlRecordType.ABORT:
            txn = self.aborted.by_marker.get(header.base_offset)
            return (False, txn) if seen else (True, None)
        if marker_type == ControlRecordType.COMMIT:
            return not seen, None
        return False, None


class _GroupCleaner:
    def __init__(
        self, plan: CleaningPlan, omap: OffsetMap, end: int, stats: CleanerStats, pace: Pace
    ) -> None:
        self.plan = plan
        self.omap = omap
        self.end = end
        self.stats = stats
        self.pace = pace
        self.txns = _TxnTracker(_Aborted(plan.aborted))
        self.txn_entries: list[AbortedTxn] = []  # of the group being written

    def write_group(self, group: list[SourceSegment]) -> CleanedSegment:
        base = group[0].base_offset
        try:
            return self._write_group(group)
        except BaseException:
            _discard_cleaned(self.plan.directory, base)
            raise

    def _write_group(self, group: list[SourceSegment]) -> CleanedSegment:
        plan = self.plan
        base = group[0].base_offset
        directory = plan.directory
        paths = {s: directory / (_name(base, s) + CLEANED_SUFFIX) for s in _SUFFIXES}
        fd = os.open(paths[LOG_SUFFIX], os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            out = _SegmentWriter(fd, base, paths, plan)
            self.txn_entries = out.txn_entries
            for seg in group:
                for header, batch in iter_segment_batches(seg.fd, seg.size):
                    self.pace(header.size)
                    self.stats.bytes_read += header.size
                    kept = self._clean_batch(header, batch)
                    if kept is not None:
                        out.append(kept)
            size = out.finish()
        finally:
            os.close(fd)
        end_offset = group[-1].end_offset
        with open(paths[RANGE_SUFFIX], "w") as f:
            f.write(f"{base} {end_offset}\n")
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(directory)
        self.stats.bytes_written += size
        return CleanedSegment(base, end_offset, tuple(s.base_offset for s in group), size)

    def _clean_batch(self, header: BatchHeader, batch: memoryview) -> bytes | memoryview | None:
        """The bytes to keep for one batch (original or rewritten), None to drop it."""
        plan, now = self.plan, self.plan.now_ms
        horizon = _horizon(header)
        tail = plan.producers.get(header.producer_id) if header.has_producer_id else None
        is_tail = tail is not None and (
            header.last_offset == tail.last_data_offset
            if tail.last_data_offset >= 0
            else header.is_control and header.producer_epoch == tail.epoch
        )
        records = list(_iter_records(batch, header))
        stamp_horizon = False
        if header.is_control:
            discardable, index_entry = False, None
            if header.has_producer_id and records:
                try:
                    marker = parse_control_record(records[0].key, records[0].value)
                except InvalidRecordError:
                    marker = None
                if marker is not None:
                    discardable, index_entry = self.txns.on_marker(header, marker.type)
            if index_entry is not None:
                self.txn_entries.append(index_entry)
            drop_all = discardable and horizon is not None and now >= horizon
            stamp_horizon = discardable and horizon is None
            kept = [] if drop_all else records
        else:
            aborted = self.txns.on_data(header)
            if aborted:
                kept = []
            else:
                kept = [r for r in records if self._keep_record(header, r, horizon)]
                stamp_horizon = horizon is None and any(r.value is None for r in kept)
        self.stats.records_kept += len(kept)
        self.stats.records_removed += len(records) - len(kept)
        if not kept and not is_tail:
            self.stats.batches_removed += 1
            return None
        if stamp_horizon and kept:
            horizon = now + plan.delete_retention_ms
        if (
            horizon is not None
            and kept
            and (header.is_control or any(r.value is None for r in kept))
        ):
            if self.stats.pending_horizon is None or horizon < self.stats.pending_horizon:
                self.stats.pending_horizon = horizon
        if len(kept) == len(records) and not stamp_horizon:
            return batch
        if not kept:
            return _empty_batch(header)
        return _rebuild(header, kept, horizon)

    def _keep_record(self, header: BatchHeader, record: Record, horizon: int | None) -> bool:
        offset = header.base_offset + record.offset_delta
        if offset >= self.end:
            return True
        if record.key is None:
            return False  # keyless records have no place in a compacted log (Kafka drops them)
        if self.omap.get(record.key) > offset:
            return False
        if record.value is None:
            return horizon is None or self.plan.now_ms < horizon
        return True


_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, RANGE_SUFFIX)


class _SegmentWriter:
    """Appends kept batches to a ``.cleaned`` log and builds its indexes (same cadence
    as LogSegment), then writes and fsyncs everything."""

    def __init__(self, fd: int, base: int, paths: dict[str, Path], plan: CleaningPlan) -> None:
        self.fd = fd
        self.base = base
        self.paths = paths
        self.interval = plan.index_interval_bytes
        self.max_offset_entries = plan.segment_index_bytes // OffsetIndex.entry_size
        self.max_time_entries = plan.segment_index_bytes // TimeIndex.entry_size
        self.offset_index = OffsetIndex(paths[INDEX_SUFFIX], base)
        self.time_index = TimeIndex(paths[TIME_INDEX_SUFFIX], base)
        self.txn_entries: list[AbortedTxn] = []
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max = -1
        self._since_index = 0
        self._buf = bytearray()
        self._buf_start = 0

    def append(self, data: bytes | memoryview) -> None:
        header = parse_header(data)
        position = self.size
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max = header.last_offset
        if self._since_index > self.interval:
            if len(self.offset_index) < self.max_offset_entries:
                self.offset_index.append(header.last_offset, position)
            if len(self.time_index) < self.max_time_entries:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
            self._since_index = 0
        self._since_index += len(data)
        self._buf += data
        self.size += len(data)
        if len(self._buf) >= _WRITE_CHUNK:
            self._flush()

    def _flush(self) -> None:
        view = memoryview(self._buf)
        done = 0
        while done < len(view):
            done += os.pwrite(self.fd, view[done:], self._buf_start + done)
        self._buf_start += len(self._buf)
        self._buf = bytearray()

    def finish(self) -> int:
        self._flush()
        os.fsync(self.fd)
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
        self.offset_index.persist(fsync=True)
        self.time_index.persist(fsync=True)
        txn_index = TransactionIndex(self.paths[TXN_INDEX_SUFFIX], self.base)
        txn_index.entries = sorted(self.txn_entries, key=lambda t: t.last_offset)
        txn_index.rewrite()
        txn_index.sync()
        return self.size


def _discard_cleaned(directory: Path, base: int) -> None:
    for suffix in _SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / (_name(base, suffix) + CLEANED_SUFFIX))


# -- batch re-encoding ----------------------------------------------------------------------


def _finish_crc(out: bytearray) -> bytes:
    _U32.pack_into(out, OFFSET_CRC, compute_crc(out, 0, len(out)))
    return bytes(out)


def _empty_batch(header: BatchHeader) -> bytes:
    """The header alone (Kafka's RETAIN_EMPTY): offsets, producer id, epoch and
    sequence stay; no records, no codec."""
    attributes = header.attributes & ~0x07 & ~DELETE_HORIZON_MASK
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out, 0,
        header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, MAGIC_V2,
        0, attributes, header.last_offset_delta, header.max_timestamp, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, 0,
    )  # fmt: skip
    return _finish_crc(out)


def _rebuild(header: BatchHeader, kept: list[Record], horizon: int | None) -> bytes:
    """Re-encode the kept records with their original offsets (and absolute timestamps)."""
    base_ts = header.base_timestamp
    records = kept
    if horizon is not None and horizon != base_ts:
        shift = base_ts - horizon
        records = [
            Record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers)
            for r in kept
        ]
        base_ts = horizon
    data = bytearray(
        build_batch(
            records,
            base_offset=header.base_offset,
            base_timestamp=base_ts,
            compression=header.compression,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            transactional=header.is_transactional,
            control=bool(header.attributes & CONTROL_MASK),
            log_append_time=header.is_log_append_time,
            partition_leader_epoch=header.partition_leader_epoch,
        )
    )
    # The last offset (hence the last sequence) must not move: producers rely on it.
    _I32.pack_into(data, _OFFSET_LAST_DELTA, header.last_offset_delta)
    if header.is_log_append_time:
        _I64.pack_into(data, OFFSET_MAX_TIMESTAMP, header.max_timestamp)
    if horizon is not None:
        (attrs,) = _I16.unpack_from(data, OFFSET_ATTRIBUTES)
        _I16.pack_into(data, OFFSET_ATTRIBUTES, attrs | DELETE_HORIZON_MASK)
    assert CRC_START == OFFSET_ATTRIBUTES
    return _finish_crc(data)
