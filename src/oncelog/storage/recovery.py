"""Open a partition directory the way Kafka's LogLoader does.

1. Remove leftovers (``*.deleted``, ``*.tmp``, indexes without a ``.log``).
2. Older segments: trust intact index files (checked lazily); a segment whose
   offset/time index is missing or torn is re-walked with CRC checks, and if
   that cuts it short every later segment is dropped.
3. The active segment is always re-walked (CRC-32C, contiguous offsets) and cut
   at the first torn or corrupt batch, unless a clean-shutdown marker vouches
   for it, in which case only the tail past its last index entry is scanned.
4. Producer state: the newest readable snapshot at or below the log end (and
   below any segment whose txn index had to be reset), then every batch after
   it is replayed; replay also re-creates the aborted-txn entries of the
   replayed range, which were cleared first so none is lost or doubled.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from oncelog.records.batch import CorruptRecordError, InvalidRecordError
from oncelog.records.control import read_marker

from . import segment_swap
from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_FILE,
    LOG_START_FILE,
    SNAPSHOT_SUFFIX,
    CleanShutdown,
    delete_snapshot,
    read_cleaner_offset,
    read_log_start,
    snapshot_path,
    take_clean_shutdown,
)
from .config import LogConfig
from .index import IndexCorruptError
from .producer_state import ProducerStateManager
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    parse_offset_file_name,
)
from .txn_index import aborted_entry

log = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    producer_state: ProducerStateManager
    snapshots: list[int]  # snapshot offsets on disk, ascending
    recovered: bool  # False when a clean shutdown let us skip the walk
    cleaner_offset: int | None = None  # the compacted log's first dirty offset, if recorded


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    producer_id_expiration_ms: int,
    sync: bool = True,
    clean: CleanShutdown | None = None,
) -> LoadedLog:
    """``sync=False`` leaves the fsyncs of a normal open (the consumed clean-shutdown
    marker, rewritten txn indexes) to one ``sync_filesystem`` by the caller, which must
    happen before the log takes appends. ``clean``: this partition's entry of the
    broker's clean-shutdown checkpoint (already removed durably by the caller)."""
    # One listing decides which small files exist: thousands of partitions open at
    # start-up, and each read or unlink of a missing file is a wasted syscall. A new
    # partition's directory is created when the listing finds none.
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        names = set(os.listdir(directory))
    clean_end = take_clean_shutdown(directory, sync=sync) if CLEAN_SHUTDOWN_FILE in names else None
    if clean_end is None and clean is not None:
        clean_end = clean.log_end_offset
    else:
        clean = None  # a partition's own marker is newer than any broker checkpoint
    if any(n.endswith(segment_swap.LEFTOVER_SUFFIXES) for n in names):
        segment_swap.recover(directory)  # before the listing: a swap changes the segments
        names = set(os.listdir(directory))
    bases = _clean_directory(directory, names)

    def open_segment(base: int) -> LogSegment:
        return LogSegment.open(directory, base, now_ms=now_ms, config=config)

    def new_segment(base: int) -> LogSegment:
        return LogSegment.create(directory, base, now_ms=now_ms, config=config)

    checkpoint = read_log_start(directory) if LOG_START_FILE in names else None

    segments: list[LogSegment] = []
    txn_reset_from: int | None = None  # lowest segment whose txn index was unreadable
    active_done = False
    for i, base in enumerate(bases):
        seg = open_segment(base)
        segments.append(seg)
        try:
            seg.txn_index.load()
        except IndexCorruptError as exc:
            log.warning("%s: %s; rebuilding it from the log", directory, exc)
            seg.txn_index.reset()
            txn_reset_from = base if txn_reset_from is None else txn_reset_from
        if i == len(bases) - 1:
            break
        next_base = bases[i + 1]
        if seg.index_files_ok() and seg.load_summary():
            seg.next_offset = next_base
            continue
        log.warning("%s: rebuilding indexes of segment %d", directory, base)
        truncated = seg.recover()
        if not truncated:
            seg.seal_time_index()
        seg.persist_indexes(fsync=True)
        if truncated or seg.next_offset > next_base:
            # Offsets after a cut are unreachable: drop the rest of the log (Kafka does too).
            log.warning(
                "%s: segment %d was corrupt; dropping %d later segments",
                directory,
                base,
                len(bases) - i - 1,
            )
            for later in bases[i + 1 :]:
                _delete_segment_files(directory, later)
            active_done = True
            break

    if not segments:
        segments.append(new_segment(checkpoint or 0))
        active_done = True
    active = segments[-1]
    recovered = True
    if not active_done:
        if clean_end is not None and active.load_clean() and active.next_offset == clean_end:
            recovered = False
        else:
            truncated = active.recover()
            if truncated:
                log.warning(
                    "%s: truncated %d bytes of torn or corrupt data at offset %d",
                    directory,
                    truncated,
                    active.next_offset,
                )
    for seg in segments:
        seg.txn_index.truncate_to(seg.next_offset)

    log_end = active.next_offset
    log_start = max(checkpoint or 0, segments[0].base_offset)
    if log_start > log_end:
        # The tail below a checkpointed start was lost: restart empty at that start so
        # offsets never go backwards for consumers.
        log.warning(
            "%s: log end %d is below log start %d; restarting the log empty",
            directory,
            log_end,
            log_start,
        )
        for seg in segments:
            seg.delete_files()
        segments = [new_segment(log_start)]
        log_end = log_start

    given: ProducerStateManager | None = None
    if not recovered and txn_reset_from is None and clean is not None:
        # The checkpoint holds the producer state at the log end: nothing to replay.
        if clean.producer_snapshot is not None:
            try:
                given = ProducerStateManager.from_snapshot(
                    clean.producer_snapshot, producer_id_expiration_ms=producer_id_expiration_ms
                )
            except ValueError as exc:
                log.warning("%s: ignoring the clean-shutdown producer state: %s", directory, exc)
    state, replay_from, snapshots = _load_snapshot(
        directory,
        sorted(
            b for b in (parse_offset_file_name(n, SNAPSHOT_SUFFIX) for n in names) if b is not None
        ),
        segments[0].base_offset,
        log_end,
        txn_reset_from,
        producer_id_expiration_ms,
        read=given is None,
    )
    if given is not None:
        state, replay_from = given, log_end
    for seg in segments:
        if seg.next_offset > replay_from:
            seg.txn_index.truncate_to(replay_from)
    _replay(segments, state, replay_from, now_ms)
    state.truncate_head(log_start, keep_dataless=True)
    if sync:
        for seg in segments:
            seg.txn_index.sync()
    for seg in segments:
        seg.release_fd()  # an idle partition holds no descriptor until it is used
    cleaner_offset = read_cleaner_offset(directory) if CLEANER_FILE in names else None
    return LoadedLog(segments, log_start, state, snapshots, recovered, cleaner_offset)


def _clean_directory(directory: Path, names: set[str]) -> list[int]:
    """Remove leftovers of interrupted deletes/writes; return the segment base offsets."""
    bases = {
        b
        for n in names
        if n.endswith(LOG_SUFFIX) and (b := parse_offset_file_name(n, LOG_SUFFIX)) is not None
    }
    for name in names:
        # Most names are a segment's files: test the suffixes once, parse only on a match.
        if name.endswith(_INDEX_SUFFIXES):
            suffix = next(s for s in _INDEX_SUFFIXES if name.endswith(s))
            b = parse_offset_file_name(name, suffix)
            orphan = b is not None and b not in bases
        else:
            orphan = False
        if orphan or name.endswith(_LEFTOVER_SUFFIXES):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(directory / name)
    return sorted(bases)


def _delete_segment_files(directory: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / f"{base:020d}{suffix}")


def _load_snapshot(
    directory: Path,
    on_disk: list[int],
    first_base: int,
    log_end: int,
    txn_reset_from: int | None,
    expiration_ms: int,
    *,
    read: bool = True,
) -> tuple[ProducerStateManager, int, list[int]]:
    """Newest usable snapshot of ``on_disk`` (ascending): inside [first segment base, log
    end] (older ones would skip data we no longer have) and not above a segment whose txn
    index needs replay. ``read=False``: the caller has the state; only prune the list."""
    limit = log_end if txn_reset_from is None else min(log_end, txn_reset_from)
    state: ProducerStateManager | None = None
    replay_from = first_base
    kept: list[int] = []
    for offset in reversed(on_disk):
        if not first_base <= offset <= log_end:
            delete_snapshot(directory, offset)
            continue
        if read and state is None and offset <= limit:
            try:
                data = snapshot_path(directory, offset).read_bytes()
                state = ProducerStateManager.from_snapshot(
                    data, producer_id_expiration_ms=expiration_ms
                )
                replay_from = offset
            except (ValueError, OSError) as exc:
                log.warning(
                    "%s: ignoring producer snapshot %d%s: %s",
                    directory,
                    offset,
                    SNAPSHOT_SUFFIX,
                    exc,
                )
                delete_snapshot(directory, offset)
                continue
        kept.append(offset)
    if state is None:
        state = ProducerStateManager(producer_id_expiration_ms=expiration_ms)
    return state, replay_from, sorted(kept)


def _replay(
    segments: list[LogSegment], state: ProducerStateManager, start: int, now_ms: int
) -> None:
    """Feed every batch at or after ``start`` to the producer state, without validation
    (Kafka's replication-origin replay), re-adding aborted-txn index entries."""
    for seg in segments:
        if seg.next_offset <= start or seg.size == 0:
            continue
        position = 0
        if start > seg.base_offset:
            found = seg.find_batch(start)
            if found is None:
                continue
            position = found[0]
        for pos, header in seg.scan(position):
            if header.base_offset < start:
                continue
            # Producer expiry runs on append time; the batch timestamp is the best record
            # of it we have (Kafka uses it too), unless it lies in the future.
            ts = header.max_timestamp if 0 <= header.max_timestamp <= now_ms else now_ms
            if not header.is_control:
                state.on_append(header, base_offset=header.base_offset, now_ms=ts)
                continue
            if header.producer_id < 0:
                continue
            try:
                commit, coordinator_epoch = read_marker(seg.pread(pos, header.size))
            except (CorruptRecordError, InvalidRecordError):
                continue  # not an end-txn marker
            done = state.on_marker(
                header.producer_id,
                header.producer_epoch,
                commit,
                coordinator_epoch,
                offset=header.base_offset,
                now_ms=ts,
            )
            if done is not None and done.is_aborted:
                seg.txn_index.append(
                    aborted_entry(
                        done.producer_id,
                        done.first_offset,
                        done.last_offset,
                        state.first_unstable_offset(),
                    )
                )
