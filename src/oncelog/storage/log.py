"""One partition's log: segments, appends, fetch reads, retention, recovery.

Semantics follow Kafka's UnifiedLog on a single node: the high watermark is
the log end offset, the last stable offset is the start of the oldest open
transaction. Requests run on the broker's one asyncio thread, so appends
are one pwrite plus in-memory index updates; fsync happens on close, as the
flush policy (flush.messages / flush.ms) asks, and after a roll in a background
job (roll_flush.py) that the durability paths wait for.

The log cleaner works from another thread: it plans and swaps under
``_lock`` (which every method touching the segment list or the producer state
holds, uncontended but for those two short moments) and rewrites files in
between without it. See ``plan_cleaning`` / ``swap_cleaned``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from oncelog.pread import NotCachedError, pread_exact
from oncelog.records.batch import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    parse_header,
    set_base_offset,
    set_log_append_time,
)
from oncelog.records.control import read_marker

from . import segment_swap
from .append_result import AppendResult
from .checkpoint import (
    CleanShutdown,
    delete_snapshot,
    snapshot_path,
    write_clean_shutdown,
    write_cleaner_offset,
    write_log_start,
    write_snapshot,
)
from .cleaner import CleanedSegment, CleanerStats, CleaningPlan, ProducerTail, SourceSegment
from .cleaner_manager import Dirtiness, SegmentFacts, measure
from .config import LogConfig
from .errors import (
    InvalidTimestampError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from .producer_state import OpenTxn, ProducerEntry, ProducerStateManager
from .recovery import load_log
from .replay import LogBatch, iter_log_batches
from .retention import size_breached, start_breached, time_breached
from .roll_flush import (
    FileWrite,
    RollFlusher,
    RollFlushes,
    RollFlushJob,
    open_directory,
    shared_flusher,
)
from .segment import LogSegment
from .txn_index import aborted_entry
from .validator import check_size

__all__ = [
    "AppendResult",
    "FileSlice",
    "InvalidTimestampError",
    "LogClosedError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
]

SNAPSHOTS_KEPT = 2
MAX_UNFLUSHED_ROLLS = 2  # per log; more and the roll waits (see _roll)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(
    method: Callable[Concatenate[PartitionLog, _P], _R],
) -> Callable[Concatenate[PartitionLog, _P], _R]:
    @functools.wraps(method)
    def wrapper(self: PartitionLog, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Whole batches of one segment file; valid until that segment's delayed delete."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return pread_exact(self.fd, self.position, self.length)


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        producer_state: ProducerStateManager,
        snapshots: list[int],
        now_ms: int,
        cleaner_offset: int | None = None,
        roll_flusher: RollFlusher | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self.producer_state = producer_state
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start = log_start_offset
        self._leo = segments[-1].next_offset
        self._recovery_point = self._leo  # offsets below are known to be fsynced
        self._last_flush_ms = now_ms
        self._snapshots = snapshots
        self._pending_deletes: list[tuple[LogSegment, int | None]] = []  # (segment, due ms)
        self._closed = False
        self._lock = threading.RLock()
        self._cleaning_sources: dict[int, LogSegment] = {}
        self._roll_flushes = RollFlushes(
            roll_flusher or shared_flusher(), max_unflushed=MAX_UNFLUSHED_ROLLS
        )
        # First offset not yet cleaned; the earliest delete horizon a pass left behind
        # (unknown after a restart: 0 lets one pass find it).
        first_dirty = cleaner_offset
        self.first_dirty_offset = (
            first_dirty
            if first_dirty is not None and log_start_offset <= first_dirty <= self._leo
            else log_start_offset
        )
        self.pending_delete_horizon: int | None = 0 if config.compact_enabled else None

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        producer_id_expiration_ms: int = 86_400_000,
        sync: bool = True,
        clean: CleanShutdown | None = None,
        roll_flusher: RollFlusher | None = None,
    ) -> PartitionLog:
        """Create the partition directory or recover it (see recovery.py).

        ``sync=False``: for opening many partitions at once, the caller makes what the
        open wrote durable with one ``sync_filesystem`` before any append (see
        ``log_batch.open_logs``), and no snapshot is written at the log end (the next roll or
        close writes one; a crash before that replays from the previous snapshot).
        ``clean``: the partition's entry in the broker's clean-shutdown checkpoint."""
        loaded = load_log(
            directory,
            config,
            now_ms=now_ms,
            producer_id_expiration_ms=producer_id_expiration_ms,
            sync=sync,
            clean=clean,
        )
        log = cls(
            directory,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            producer_state=loaded.producer_state,
            snapshots=loaded.snapshots,
            now_ms=now_ms,
            cleaner_offset=loaded.cleaner_offset,
            roll_flusher=roll_flusher,
        )
        active = loaded.segments[-1]
        if loaded.recovered and active.size:
            # What recovery kept came from the page cache; make it durable before a
            # snapshot at the log end vouches for it (unsynced, the caller's one sync
            # does, and a snapshot beyond the surviving log end is ignored on open).
            if sync:
                active.flush(fsync_indexes=True)
            else:
                active.persist_indexes()
        if sync and log._leo != log._log_start and log._leo not in log._snapshots:
            log.take_snapshot()
        return log

    # -- offsets ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._leo  # single node: every append is fully replicated at once

    @property
    def last_stable_offset(self) -> int:
        with self._lock:
            first_unstable = self.producer_state.first_unstable_offset()
        return self._leo if first_unstable is None else first_unstable

    @_locked
    def open_transactions(self) -> list[OpenTxn]:
        """The transactions open in this partition, oldest first (monitoring)."""
        return self.producer_state.open_transactions()

    @_locked
    def producer_ids(self) -> list[int]:
        return self.producer_state.producer_ids()

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        with self._lock:
            return tuple(self._segments)

    @_locked
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    @_locked
    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.configure(config)

    # -- appends ------------------------------------------------------------------------

    @_locked
    def append(
        self,
        batch: bytearray | memoryview,
        header: BatchHeader,
        *,
        now_ms: int,
        coordinator: bool = False,
    ) -> AppendResult:
        """Append one CRC-validated client batch; duplicates are answered, not written.

        A client batch has passed ``validator.validate_produce_batch`` first; the size
        rule (``check_size``) is checked here only, for every writer.
        ``coordinator``: a batch written by a coordinator on a producer's behalf (Kafka's
        AppendOrigin.COORDINATOR, e.g. transactional offsets): no sequence checks, but a
        transactional batch still opens the producer's transaction in this partition.
        """
        self._check_open()
        if len(batch) != header.size:
            raise CorruptRecordError("the buffer must hold exactly one record batch")
        if header.is_control:
            raise InvalidRecordError("clients may not write control batches")
        check_size(header.size, self.config)
        if header.producer_id >= 0 and not coordinator:
            dup = self.producer_state.check_append(header)
            if dup is not None:
                return AppendResult(
                    dup.first_offset, dup.last_offset, -1, self._log_start, duplicate=True
                )
        base, log_append_time, header = self._write(batch, header, now_ms)
        self.producer_state.on_append(header, base_offset=base, now_ms=now_ms)
        self._apply_flush_policy(now_ms)
        return AppendResult(base, base + header.last_offset_delta, log_append_time, self._log_start)

    @_locked
    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        """What the log knows of a producer (its epoch, open transaction, sequences)."""
        return self.producer_state.producer(producer_id)

    def read_batches(self, start: int | None = None, end: int | None = None) -> Iterator[LogBatch]:
        """Data batches and end-txn markers from ``start`` to ``end`` (see
        ``replay.iter_log_batches``): how a coordinator loads its partition."""
        return iter_log_batches(self, start, end)

    def append_control(self, batch: bytearray, header: BatchHeader, *, now_ms: int) -> AppendResult:
        """Append a COMMIT/ABORT marker from the transaction coordinator."""
        self._check_open()
        if len(batch) != header.size:
            raise CorruptRecordError("the buffer must hold exactly one record batch")
        if not header.is_control or header.producer_id < 0:
            raise InvalidRecordError("an end-txn marker must be a control batch with a producer id")
        commit, coordinator_epoch = read_marker(batch)
        pid, epoch = header.producer_id, header.producer_epoch
        self.producer_state.check_marker(pid, epoch, coordinator_epoch)
        base, log_append_time, header = self._write(batch, header, now_ms)
        done = self.producer_state.on_marker(
            pid, epoch, commit, coordinator_epoch, offset=base, now_ms=now_ms
        )
        if done is not None and done.is_aborted:
            # The entry goes to the segment holding the marker, as in Kafka.
            self._segments[-1].txn_index.append(
                aborted_entry(
                    pid,
                    done.first_offset,
                    done.last_offset,
                    self.producer_state.first_unstable_offset(),
                )
            )
        self._apply_flush_policy(now_ms)
        return AppendResult(base, base + header.last_offset_delta, log_append_time, self._log_start)

    def _write(
        self, batch: bytearray | memoryview, header: BatchHeader, now_ms: int
    ) -> tuple[int, int, BatchHeader]:
        seg = self._segment_for(header, now_ms)
        base = self._leo
        set_base_offset(batch, 0, base)
        log_append_time = -1
        if self.config.log_append_time:
            set_log_append_time(batch, 0, header.size, now_ms)
            log_append_time = now_ms
            header = dataclasses.replace(
                header, max_timestamp=now_ms, attributes=header.attributes | TIMESTAMP_TYPE_MASK
            )
        last = base + header.last_offset_delta
        seg.append(batch, last_offset=last, max_timestamp=header.max_timestamp, now_ms=now_ms)
        self._leo = last + 1
        return base, log_append_time, header

    def _segment_for(self, header: BatchHeader, now_ms: int) -> LogSegment:
        """The active segment, rolled first if this batch must not go into it (Kafka's shouldRoll)."""
        seg = self._segments[-1]
        cfg = self.config
        if seg.size > 0 and (
            seg.size + header.size > cfg.segment_bytes
            or now_ms - seg.rolling_base_ms > cfg.max_segment_ms
            or seg.index_full()
            or not seg.fits_relative(self._leo + header.last_offset_delta)
        ):
            seg = self._roll(now_ms)
        return seg

    @_locked
    def _roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment; the old one is made durable by a background job.

        Its time index file is deleted first, so until the job has fsynced its log and
        written its indexes a crash makes recovery re-walk it (see roll_flush.py)."""
        old = self._segments[-1]
        index_writes, fsync_names = old.detach_for_roll_flush()
        end = self._leo
        dir_fd = open_directory(self.directory)
        try:
            log_fd = os.dup(old.fd)
        except OSError:
            os.close(dir_fd)
            raise
        try:
            new = LogSegment.create(self.directory, end, now_ms=now_ms, config=self.config)
        except OSError:
            os.close(log_fd)
            os.close(dir_fd)
            raise
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._last_flush_ms = now_ms
        snapshot, pruned = self._register_snapshot()
        job = RollFlushJob(
            description=f"{self.directory.name}/{old.base_offset}",
            end_offset=end,
            log_fd=log_fd,
            dir_fd=dir_fd,
            index_writes=index_writes,
            fsync_names=fsync_names,
            snapshot=snapshot,
            pruned_snapshots=pruned,
            skip_indexes=lambda: old.deleted,
        )
        self._roll_flushes.submit(old.base_offset, job).add_done_callback(self._roll_flushed)
        return new

    def _register_snapshot(self) -> tuple[FileWrite | None, tuple[str, ...]]:
        """The producer state at the log end and the older snapshots it replaces, for the
        roll's job to write and then delete (so none is deleted before its successor is
        on disk); the list of kept snapshots is updated now."""
        if self._leo == self._log_start:
            return None, ()
        data = self.producer_state.snapshot()
        if self._leo not in self._snapshots:
            self._snapshots.append(self._leo)
            self._snapshots.sort()
        pruned = []
        while len(self._snapshots) > SNAPSHOTS_KEPT:
            pruned.append(snapshot_path(self.directory, self._snapshots.pop(0)).name)
        name = snapshot_path(self.directory, self._leo).name
        return FileWrite(name, 0, data, truncate=True), tuple(pruned)

    def _roll_flushed(self, future: Future[int]) -> None:
        # Runs on the flusher's thread, without the lock: a plain int store. Racing a
        # flush on the loop it can only move the recovery point back to a smaller value
        # that is also durable, which costs at most one more fsync later.
        if not future.cancelled() and future.exception() is None:
            end = future.result()
            if end > self._recovery_point:
                self._recovery_point = end

    def wait_for_roll_flush(self, *, check: bool = True) -> None:
        """Block until every roll's flush is done; with ``check``, raises its ``OSError``
        if one failed (then nothing in this log may be called durable). The job takes no
        lock, so waiting while holding ``_lock`` is safe."""
        self._roll_flushes.wait(check=check)

    # -- durability ---------------------------------------------------------------------

    def _apply_flush_policy(self, now_ms: int) -> None:
        # flush.messages=1 fsyncs every append before it is acknowledged: the
        # single-node durability setting (there is no replica to recover from).
        cfg = self.config
        if (
            self._leo - self._recovery_point >= cfg.flush_messages
            or now_ms - self._last_flush_ms >= cfg.flush_ms
        ):
            self.wait_for_roll_flush()
            self._segments[-1].fsync_log()
            self._recovery_point = self._leo
            self._last_flush_ms = now_ms

    @property
    def durable_offset(self) -> int:
        """Offsets below this are fsynced (the recovery point)."""
        return self._recovery_point

    @_locked
    def sync_target(self) -> tuple[int, int, Future[int] | None]:
        """(active segment fd, log end offset, pending roll flush): once the roll flush
        (if any) is done, an fdatasync of that fd, from any thread, makes every offset
        below that end durable. Then ``mark_durable(end)``, back on the loop."""
        self._check_open()
        return self._segments[-1].fd, self._leo, self._roll_flushes.pending()

    @_locked
    def mark_durable(self, offset: int) -> None:
        if offset > self._recovery_point:
            self._recovery_point = offset

    @_locked
    def maybe_flush(self, now_ms: int) -> None:
        """Housekeeping tick: flush.ms, and deferred file deletion."""
        self._check_open()
        self._process_pending_deletes(now_ms)
        if (
            self._leo > self._recovery_point
            and now_ms - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            self._last_flush_ms = now_ms

    @_locked
    def flush(self) -> None:
        """fsync the active segment's log and write out its indexes."""
        self._check_open()
        self.wait_for_roll_flush()
        active = self._segments[-1]
        active.flush()
        active.txn_index.sync()
        self._recovery_point = self._leo

    @_locked
    def take_snapshot(self) -> None:
        """Write the producer state at the log end; keep the newest two snapshots."""
        self._check_open()
        # A snapshot at N says txn-index entries below N are on disk: make it true.
        for seg in self._segments:
            seg.txn_index.sync()
        write_snapshot(self.directory, self._leo, self.producer_state.snapshot())
        if self._leo not in self._snapshots:
            self._snapshots.append(self._leo)
            self._snapshots.sort()
        while len(self._snapshots) > SNAPSHOTS_KEPT:
            delete_snapshot(self.directory, self._snapshots.pop(0))

    @_locked
    def close(self) -> None:
        """Flush everything, snapshot, mark the shutdown clean and release the files."""
        if self._closed:
            return
        self.wait_for_roll_flush()
        active = self._segments[-1]
        active.flush(fsync_indexes=True)
        self.take_snapshot()
        write_clean_shutdown(self.directory, self._leo)
        self._release()

    @_locked
    def write_out_for_checkpoint(self) -> CleanShutdown:
        """First half of ``log_batch.close_logs``: the index tails written (unsynced), the files
        still open. Returns this log's clean-shutdown entry: its end and, unless a
        snapshot file already covers that end, the producer state there."""
        self._check_open()
        self.wait_for_roll_flush()
        self._segments[-1].persist_indexes()
        fresh = self._leo not in self._snapshots and self._leo != self._log_start
        return CleanShutdown(self._leo, self.producer_state.snapshot() if fresh else None)

    @_locked
    def release_if_at(self, end: int) -> bool:
        """Second half of ``log_batch.close_logs``: release the files if nothing was appended
        since ``write_out_for_checkpoint`` (else the caller closes this log the slow way)."""
        if self._closed or self._leo != end:
            return False
        self._release()
        return True

    @_locked
    def abandon(self) -> None:
        """Release the files without flushing or marking a clean shutdown, as a crash
        would (the next open recovers): for a log whose owner gives up on it."""
        if not self._closed:
            self._release()
        # Cancelled, a job stops after the step it is in; waiting keeps it from writing
        # while the next owner reopens the directory.
        self._roll_flushes.wait(check=False)

    @_locked
    def delete(self) -> None:
        """Topic deletion: drop the files, no flushing."""
        if not self._closed:
            self._release()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _release(self) -> None:
        self._roll_flushes.cancel()  # a close waited for them; a delete or crash need not
        for seg in self._segments:
            seg.close()
        for seg, _ in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes.clear()
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")

    # -- reads --------------------------------------------------------------------------

    @_locked
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
        cached_only: bool = False,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``offset``, within one segment.

        Stops before the first batch starting at or after ``max_offset`` (high
        watermark / LSO) and within ``max_bytes``, except that with ``min_one`` an
        oversized first batch is returned whole (KIP-74). ``cached_only``: raise
        ``NotCachedError`` if finding the range (indexes, batch headers) would wait for
        the disk; the event loop then asks again from a thread.
        """
        self._check_open()
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start}, {self._leo}]"
            )
        bound = self._leo if max_offset is None else min(max_offset, self._leo)
        if offset >= bound:
            return None
        i = max(0, bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            found = seg.find_batch(offset, cached_only=cached_only)
            if found is not None:
                break
        else:
            return None
        position, first = found
        if first.base_offset >= bound:
            return None
        limit = seg.size
        if bound < seg.next_offset:
            end_batch = seg.find_batch(bound, cached_only=cached_only)
            if end_batch is not None:
                end_pos, end_header = end_batch
                limit = end_pos if end_header.base_offset >= bound else end_pos + end_header.size
        if limit - position <= max_bytes:
            return FileSlice(seg.fd, position, limit - position)
        end = seg.last_boundary_within(
            position, position + max(max_bytes, 0), cached_only=cached_only
        )
        if end == position:
            if not min_one:
                return None
            end = position + first.size
        return FileSlice(seg.fd, position, end - position)

    @_locked
    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted txns overlapping [start, end)."""
        self._check_open()
        i = max(0, bisect_right(self._bases, start_offset) - 1)
        out: list[tuple[int, int]] = []
        for seg in self._segments[i:]:
            found, complete = seg.txn_index.collect(start_offset, end_offset)
            out.extend((t.producer_id, t.first_offset) for t in found)
            if complete:
                break
        return out

    @_locked
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp`` (ListOffsets).

        The batch is located via the time and offset indexes, then that one batch's
        records are walked (inflating it if compressed) to find the exact record.
        """
        self._check_open()
        for seg in self._segments:
            if seg.next_offset <= self._log_start or seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, self._log_start)
            if found is not None:
                return found
        return None

    @_locked
    def batch_timestamp(self, offset: int) -> int | None:
        """The max timestamp of the batch holding ``offset`` (the value the time index
        keeps for it), or None when the offset is not in the log, or finding its batch
        would wait for the disk: the console reads this on the event loop for every
        committed offset, so it must never block (the answer is then simply unknown)."""
        if self._closed or offset < self._log_start or offset >= self._leo:
            return None
        i = max(0, bisect_right(self._bases, offset) - 1)
        try:
            for seg in self._segments[i:]:
                found = seg.find_batch(offset, cached_only=True)
                if found is not None:
                    return found[1].max_timestamp
        except (NotCachedError, OSError):
            return None
        return None

    @_locked
    def max_timestamp(self) -> tuple[int, int]:
        """(timestamp, offset) of the first record with the largest timestamp, or (-1, -1).

        Segments track the max per batch (as Kafka does); the winning batch is then
        decoded for the exact record, as Kafka 3.8+ answers MAX_TIMESTAMP.
        """
        self._check_open()
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return -1, -1
        return best.max_timestamp, best.max_timestamp_record_offset()

    # -- deletion -----------------------------------------------------------------------

    @_locked
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start to ``offset`` (-1 = high watermark).

        Returns the new log start offset (the low watermark).
        """
        self._check_open()
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: high watermark is {self.high_watermark}"
            )
        if offset > self._log_start:
            self._set_log_start(offset)
            self._delete_prefix(start_breached(self._segments, self._log_start), None)
        return self._log_start

    @_locked
    def apply_retention(self, now_ms: int) -> int:
        """Delete old segments by log start, retention.ms and retention.bytes.

        Kafka's rules: whole segments from the oldest, by their largest timestamp
        (time) or while the rest stays above retention.bytes (size). As in Kafka a
        fully expired log rolls a fresh empty segment first, so data never outlives
        its retention just because it sits in the active segment.
        Returns the number of segments deleted.
        """
        self._check_open()
        self._process_pending_deletes(now_ms)
        count = max(
            start_breached(self._segments, self._log_start),
            time_breached(self._segments, self.config, now_ms),
            size_breached(self._segments, self.config),
        )
        if count:
            self._delete_prefix(count, now_ms)
        return count

    def _delete_prefix(self, count: int, now_ms: int | None) -> None:
        if count >= len(self._segments):
            assert now_ms is not None
            self._roll(now_ms)
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        due = None if now_ms is None else now_ms + self.config.file_delete_delay_ms
        for seg in doomed:
            seg.mark_deleted()
            self._pending_deletes.append((seg, due))
        first_base = self._segments[0].base_offset
        if first_base > self._log_start:
            self._set_log_start(first_base)
        # Snapshots below the first segment would replay over data that is gone.
        while self._snapshots and self._snapshots[0] < first_base:
            delete_snapshot(self.directory, self._snapshots.pop(0))

    def _set_log_start(self, offset: int) -> None:
        self._log_start = offset
        write_log_start(self.directory, offset)
        self.producer_state.truncate_head(offset)

    def _process_pending_deletes(self, now_ms: int) -> None:
        """Close and unlink deleted segments once file.delete.delay.ms has passed, so a
        FileSlice handed out just before the delete stays readable meanwhile."""
        keep: list[tuple[LogSegment, int | None]] = []
        for seg, due in self._pending_deletes:
            if due is None:
                due = now_ms + self.config.file_delete_delay_ms
            if now_ms >= due:
                seg.delete_files()
            else:
                keep.append((seg, due))
        self._pending_deletes = keep

    # -- compaction (called from the cleaner's thread) -------------------------------------

    def _segment_facts(self, first_dirty: int) -> list[SegmentFacts]:
        """Facts about the non-active segments; the first batch's timestamp is read
        only for the first dirty segment (all max.compaction.lag.ms looks at)."""
        out: list[SegmentFacts] = []
        segs = self._segments
        looked = False
        for seg, nxt in zip(segs, segs[1:], strict=False):
            first_ts = -1
            if nxt.base_offset > first_dirty and not looked:
                looked = True
                if seg.size >= HEADER_SIZE:
                    first_ts = parse_header(seg.pread(0, HEADER_SIZE)).max_timestamp
            out.append(
                SegmentFacts(
                    seg.base_offset, nxt.base_offset, seg.size, seg.largest_timestamp(), first_ts
                )
            )
        return out

    @_locked
    def dirtiness(self, now_ms: int) -> Dirtiness | None:
        """How much of this log a compaction pass could clean now (None: not compacted)."""
        if self._closed or not self.config.compact_enabled:
            return None
        first_dirty = max(self.first_dirty_offset, self._log_start)
        # A rolled segment's job writes its index files by name: a swap must not put a
        # cleaned segment's files under those names meanwhile, so cleaning stops below
        # the oldest segment still being flushed, as below the active one.
        flushing_from = self._roll_flushes.oldest_base()
        return measure(
            self._segment_facts(first_dirty),
            first_dirty_offset=first_dirty,
            last_stable_offset=self.last_stable_offset,
            active_base=self._segments[-1].base_offset if flushing_from is None else flushing_from,
            config=self.config,
            now_ms=now_ms,
        )

    @_locked
    def plan_cleaning(self, now_ms: int, *, dedupe_buffer_bytes: int) -> CleaningPlan | None:
        """Everything a pass needs, with private descriptors of the source segments (the
        caller closes them via ``CleaningPlan.segments``). None if nothing is cleanable."""
        d = self.dirtiness(now_ms)  # bounded below any segment whose roll flush runs
        if d is None or d.cleanable_bytes == 0:
            return None
        # Whole segments below the cleanable end, and never one reaching the LSO.
        lso = self.last_stable_offset
        sources: list[LogSegment] = []
        ends: list[int] = []
        for seg, nxt in zip(self._segments, self._segments[1:], strict=False):
            if seg.base_offset >= d.end_offset or nxt.base_offset > lso:
                break
            sources.append(seg)
            ends.append(nxt.base_offset)
        if not sources:
            return None
        self._cleaning_sources = {s.base_offset: s for s in sources}
        aborted = sorted(
            (t for s in self._segments for t in s.txn_index.entries), key=lambda t: t.last_offset
        )
        producers = {
            p.producer_id: ProducerTail(p.last_data_offset, p.producer_epoch)
            for p in self.producer_state.producers()
        }
        return CleaningPlan(
            directory=self.directory,
            segments=tuple(
                SourceSegment(s.base_offset, end, s.size, os.dup(s.fd))
                for s, end in zip(sources, ends, strict=True)
            ),
            first_dirty_offset=d.first_dirty_offset,
            end_offset=d.end_offset,
            aborted=tuple(aborted),
            producers=producers,
            delete_retention_ms=self.config.delete_retention_ms,
            now_ms=now_ms,
            max_segment_bytes=self.config.segment_bytes,
            segment_index_bytes=self.config.segment_index_bytes,
            index_interval_bytes=self.config.index_interval_bytes,
            dedupe_buffer_bytes=dedupe_buffer_bytes,
        )

    @_locked
    def swap_cleaned(self, cleaned: CleanedSegment, *, now_ms: int) -> bool:
        """Replace a cleaned group's source segments, if they are all still here.

        The group's files must be staged (``segment_swap.stage``). Old segments go to
        the delayed-delete list, so fetches holding their descriptors stay valid.
        Returns False (caller discards the files) if retention or a delete got there first.
        """
        if self._closed:
            return False
        sources = [self._cleaning_sources.get(b) for b in cleaned.source_bases]
        first = sources[0]
        if first is None or first not in self._segments:
            return False
        i = self._segments.index(first)
        k = len(sources)
        if i + k >= len(self._segments) or self._segments[i : i + k] != sources:
            return False
        for seg in self._segments[i : i + k]:
            seg.mark_deleted()
            self._pending_deletes.append((seg, None))
        segment_swap.finish(self.directory, cleaned.base_offset, sync=False)
        new = LogSegment.open(
            self.directory,
            cleaned.base_offset,
            now_ms=now_ms,
            config=self.config,
        )
        new.txn_index.load()
        if not (new.index_files_ok() and new.load_summary()):
            new.rebuild_indexes()
        new.next_offset = cleaned.end_offset
        self._segments[i : i + k] = [new]
        self._bases[i : i + k] = [new.base_offset]
        return True

    @_locked
    def finish_cleaning(self, stats: CleanerStats | None) -> None:
        """End a pass: with ``stats`` (it completed) the cleaned range is recorded."""
        self._cleaning_sources = {}
        if stats is None or self._closed:
            return
        if stats.map_end_offset > self.first_dirty_offset:
            self.first_dirty_offset = stats.map_end_offset
            write_cleaner_offset(self.directory, self.first_dirty_offset)
        self.pending_delete_horizon = stats.pending_horizon
