"""One partition's local log: its segments and what is done with them.

Kafka's ``LocalLog``: the segment list, appending a batch's bytes at the log end (offsets
stamped), rolling (the old segment made durable by a background job, roll_flush.py), the
flush policy and durability marks, fetch reads (offsets, timestamps, aborted transactions
from the txn indexes), retention and DeleteRecords, delayed file deletion, close and
release. It knows nothing of producers or transactions: ``unified_log.UnifiedLog`` adds
those on top, as Kafka's ``UnifiedLog`` wraps its ``LocalLog``, and is told of rolls and
of a moved log start through the hooks at the foot of ``LocalLog``.

Every method touching the segment list holds ``_lock`` (an RLock the log cleaner's thread
also takes for its two short moments, see ``unified_log``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import threading
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from oncelog.pread import NotCachedError, pread_exact
from oncelog.records.batch import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
)

from .checkpoint import write_log_start
from .config import LogConfig
from .errors import LogClosedError, OffsetOutOfRangeError
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

MAX_UNFLUSHED_ROLLS = 2  # per log; more and the roll waits (see _roll)

_L = TypeVar("_L", bound="LocalLog")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def locked(
    method: Callable[Concatenate[_L, _P], _R],
) -> Callable[Concatenate[_L, _P], _R]:
    """Run the method holding the log's lock."""

    @functools.wraps(method)
    def wrapper(self: _L, *args: _P.args, **kwargs: _P.kwargs) -> _R:
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


class LocalLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        now_ms: int,
        roll_flusher: RollFlusher | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start = log_start_offset
        self._leo = segments[-1].next_offset
        self._recovery_point = self._leo  # offsets below are known to be fsynced
        self._last_flush_ms = now_ms
        self._pending_deletes: list[tuple[LogSegment, int | None]] = []  # (segment, due ms)
        self._closed = False
        self._lock = threading.RLock()
        self._roll_flushes = RollFlushes(
            roll_flusher or shared_flusher(), max_unflushed=MAX_UNFLUSHED_ROLLS
        )

    # -- offsets -----------------------------------------------------------------------

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
    def segments(self) -> tuple[LogSegment, ...]:
        with self._lock:
            return tuple(self._segments)

    @locked
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    @locked
    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.configure(config)

    # -- appends -----------------------------------------------------------------------

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

    @locked
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
        snapshot, pruned = self._roll_snapshot()
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

    # -- durability --------------------------------------------------------------------

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

    @locked
    def sync_target(self) -> tuple[int, int, Future[int] | None]:
        """(active segment fd, log end offset, pending roll flush): once the roll flush
        (if any) is done, an fdatasync of that fd, from any thread, makes every offset
        below that end durable. Then ``mark_durable(end)``, back on the loop."""
        self._check_open()
        return self._segments[-1].fd, self._leo, self._roll_flushes.pending()

    @locked
    def mark_durable(self, offset: int) -> None:
        if offset > self._recovery_point:
            self._recovery_point = offset

    @locked
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

    @locked
    def flush(self) -> None:
        """fsync the active segment's log and write out its indexes."""
        self._check_open()
        self.wait_for_roll_flush()
        active = self._segments[-1]
        active.flush()
        active.txn_index.sync()
        self._recovery_point = self._leo

    @locked
    def release_if_at(self, end: int) -> bool:
        """Second half of ``log_batch.close_logs``: release the files if nothing was appended
        since ``write_out_for_checkpoint`` (else the caller closes this log the slow way)."""
        if self._closed or self._leo != end:
            return False
        self._release()
        return True

    @locked
    def abandon(self) -> None:
        """Release the files without flushing or marking a clean shutdown, as a crash
        would (the next open recovers): for a log whose owner gives up on it."""
        if not self._closed:
            self._release()
        # Cancelled, a job stops after the step it is in; waiting keeps it from writing
        # while the next owner reopens the directory.
        self._roll_flushes.wait(check=False)

    @locked
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

    # -- reads -------------------------------------------------------------------------

    @locked
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

    @locked
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

    @locked
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

    @locked
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

    @locked
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

    # -- deletion ----------------------------------------------------------------------

    @locked
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

    @locked
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
        self._segments_deleted(first_base)

    def _set_log_start(self, offset: int) -> None:
        self._log_start = offset
        write_log_start(self.directory, offset)
        self._log_start_moved(offset)

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

    # -- what the log above adds (UnifiedLog overrides these) ------------------------------

    def _roll_snapshot(self) -> tuple[FileWrite | None, tuple[str, ...]]:
        """A snapshot file the roll's background job writes, and the files it replaces."""
        return None, ()

    def _log_start_moved(self, offset: int) -> None:
        """The log start moved up to ``offset`` (retention, DeleteRecords)."""

    def _segments_deleted(self, first_base: int) -> None:
        """Segments below ``first_base`` were deleted."""
