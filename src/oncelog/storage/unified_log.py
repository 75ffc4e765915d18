"""One partition's log as the broker uses it: Kafka's ``UnifiedLog`` on a single node.

On top of the segments (``local_log.LocalLog``: roll, flush, retention, reads) it keeps
the producer state and the transactions: the append rules (the size rule, a producer's
sequence and duplicate checks, end-txn markers and the aborted-transaction index), the
producer-state snapshots (at rolls, on close, in the clean-shutdown checkpoint), the last
stable offset, and the log cleaner's plan and swap. The high watermark is the log end
offset, the last stable offset the start of the oldest open transaction. Requests run on
the broker's one asyncio thread, so appends are one pwrite plus in-memory index updates;
fsync happens on close, as the flush policy (flush.messages / flush.ms) asks, and after a
roll in a background job (roll_flush.py) that the durability paths wait for.

The log cleaner works from another thread: it plans and swaps under ``_lock`` (which every
method touching the segment list or the producer state holds, uncontended but for those
two short moments) and rewrites files in between without it. See ``plan_cleaning`` /
``swap_cleaned``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from oncelog.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    parse_header,
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
from .local_log import FileSlice, LocalLog, locked
from .producer_state import OpenTxn, ProducerEntry, ProducerStateManager
from .recovery import load_log
from .replay import LogBatch, iter_log_batches
from .roll_flush import FileWrite, RollFlusher
from .segment import LogSegment
from .txn_index import aborted_entry
from .validator import check_size

__all__ = [
    "AppendResult",
    "FileSlice",
    "InvalidTimestampError",
    "LogClosedError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnifiedLog",
]

SNAPSHOTS_KEPT = 2


class UnifiedLog(LocalLog):
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
        super().__init__(
            directory,
            config,
            segments,
            log_start_offset=log_start_offset,
            now_ms=now_ms,
            roll_flusher=roll_flusher,
        )
        self.producer_state = producer_state
        self._snapshots = snapshots
        self._cleaning_sources: dict[int, LogSegment] = {}
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
    ) -> UnifiedLog:
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

    # -- offsets -----------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        with self._lock:
            first_unstable = self.producer_state.first_unstable_offset()
        return self._leo if first_unstable is None else first_unstable

    @locked
    def open_transactions(self) -> list[OpenTxn]:
        """The transactions open in this partition, oldest first (monitoring)."""
        return self.producer_state.open_transactions()

    @locked
    def producer_ids(self) -> list[int]:
        return self.producer_state.producer_ids()

    # -- appends -----------------------------------------------------------------------

    @locked
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

    @locked
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

    # -- producer-state snapshots ------------------------------------------------------

    def _roll_snapshot(self) -> tuple[FileWrite | None, tuple[str, ...]]:
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

    def _log_start_moved(self, offset: int) -> None:
        self.producer_state.truncate_head(offset)

    def _segments_deleted(self, first_base: int) -> None:
        # Snapshots below the first segment would replay over data that is gone.
        while self._snapshots and self._snapshots[0] < first_base:
            delete_snapshot(self.directory, self._snapshots.pop(0))

    @locked
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

    @locked
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

    @locked
    def write_out_for_checkpoint(self) -> CleanShutdown:
        """First half of ``log_batch.close_logs``: the index tails written (unsynced), the files
        still open. Returns this log's clean-shutdown entry: its end and, unless a
        snapshot file already covers that end, the producer state there."""
        self._check_open()
        self.wait_for_roll_flush()
        self._segments[-1].persist_indexes()
        fresh = self._leo not in self._snapshots and self._leo != self._log_start
        return CleanShutdown(self._leo, self.producer_state.snapshot() if fresh else None)

    # -- compaction (called from the cleaner's thread) ---------------------------------

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

    @locked
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

    @locked
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

    @locked
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

    @locked
    def finish_cleaning(self, stats: CleanerStats | None) -> None:
        """End a pass: with ``stats`` (it completed) the cleaned range is recorded."""
        self._cleaning_sources = {}
        if stats is None or self._closed:
            return
        if stats.map_end_offset > self.first_dirty_offset:
            self.first_dirty_offset = stats.map_end_offset
            write_cleaner_offset(self.directory, self.first_dirty_offset)
        self.pending_delete_horizon = stats.pending_horizon
