"""Making a rolled segment durable off the event loop.

When the active segment rolls, its log, its indexes, the directory entry of the new
segment and the producer-state snapshot at the roll must reach the disk. Done on the
event loop, the fsync of a 1 GiB segment held every client for 270-430 ms (the kernel
waits for writeback, block bitmaps, writeback throttling). Kafka schedules this flush
on a background thread (``UnifiedLog.roll`` → ``flushUptoOffsetExclusive``); so do we.

The roll captures everything the job writes (index bytes, snapshot bytes, duplicated
descriptors) on the loop, so the job never touches the log's state or its lock, and a
later delete, retention or close cannot make it write somewhere else:

- the log file is fsynced through a duplicate of its descriptor (the segment may be
  closed and its descriptor number reused meanwhile);
- every other file is opened relative to a descriptor of the partition directory, so
  once the topic is deleted (directory removed) nothing is re-created, not even in a
  new directory of the same name.

Crash safety: until the job is done the rolled segment has no time index on disk
(``UnifiedLog._roll`` deletes it before creating the new segment; on ext4 the
journal commits the two in that order), and recovery re-walks an older segment whose
index is missing, as it does the active one. The job writes the time index last,
after the log's and the txn index's fsyncs, so an index on disk never vouches for
bytes that a crash could lose.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

FileSync = Callable[[int], None]

# A flush slower than this is logged: it would have been a loop stall before.
SLOW_FLUSH_S = 1.0
# Jobs queued at most, over all logs (see RollFlusher.submit).
MAX_QUEUED = 256


@dataclass(frozen=True, slots=True)
class FileWrite:
    """Bytes for one file of the partition directory, written and fsynced by the job."""

    name: str
    position: int
    data: bytes
    truncate: bool  # the file's old content is not ours: replace it


@dataclass(slots=True)
class RollFlushJob:
    """What one roll leaves to make durable. Owns ``log_fd`` and ``dir_fd``."""

    description: str  # for log lines: directory and segment
    end_offset: int  # offsets below are durable once the job is done
    log_fd: int
    dir_fd: int
    index_writes: tuple[FileWrite, ...]
    fsync_names: tuple[str, ...]  # files already written, to fsync (a txn index)
    snapshot: FileWrite | None
    pruned_snapshots: tuple[str, ...]  # deleted once ``snapshot`` is in place
    skip_indexes: Callable[[], bool] = lambda: False  # the segment was deleted meanwhile
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        """The log was released (deleted, abandoned): write nothing more."""
        self.cancelled = True


class RollFlusher:
    """One worker thread runs the jobs in order: a log's jobs never overlap, and a
    finished job means every earlier one (of any log) finished too."""

    def __init__(self, fsync: FileSync = os.fsync, *, max_queued: int = MAX_QUEUED) -> None:
        self._fsync = fsync
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oncelog-roll-flush")
        self._slots = threading.BoundedSemaphore(max_queued)

    def submit(self, job: RollFlushJob) -> Future[int]:
        """Returns a future of ``job.end_offset``; it raises ``OSError`` if a write or
        fsync failed (nothing from that log may then be acknowledged as durable).
        Blocks while ``max_queued`` jobs wait: each holds two descriptors, and a roll
        storm must slow the writers down rather than pile up."""
        self._slots.acquire()
        try:
            return self._executor.submit(self._run, job)
        except BaseException:
            self._slots.release()
            raise

    def _run(self, job: RollFlushJob) -> int:
        started = time.monotonic()
        try:
            if job.cancelled:
                return job.end_offset
            self._fsync(job.log_fd)
            if not job.cancelled and not job.skip_indexes():
                # The txn index first and the time index last: once the time index is
                # on disk, recovery trusts the segment and everything it indexes.
                for name in job.fsync_names:
                    self._fsync_name(job.dir_fd, name)
                for write in job.index_writes:
                    self._write(job.dir_fd, write)
            if job.cancelled:
                return job.end_offset
            self._fsync(job.dir_fd)  # the new segment's files, created at the roll
            if job.snapshot is not None and not job.cancelled:
                self._replace(job.dir_fd, job.snapshot)
                for name in job.pruned_snapshots:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=job.dir_fd)
        except OSError as exc:
            if job.cancelled:
                return job.end_offset  # its directory went away under it: nothing to keep
            log.error("flushing rolled segment %s failed: %s", job.description, exc)
            raise
        finally:
            os.close(job.log_fd)
            os.close(job.dir_fd)
            # The log keeps the job until its next roll: drop the bytes now.
            job.index_writes, job.snapshot, job.pruned_snapshots = (), None, ()
            self._slots.release()
        elapsed = time.monotonic() - started
        if elapsed > SLOW_FLUSH_S:
            log.warning("flushing rolled segment %s took %.1f s", job.description, elapsed)
        return job.end_offset

    def _write(self, dir_fd: int, write: FileWrite) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if write.truncate else 0)
        fd = os.open(write.name, flags, 0o644, dir_fd=dir_fd)
        try:
            _pwrite_all(fd, write.data, write.position)
            self._fsync(fd)
        finally:
            os.close(fd)

    def _fsync_name(self, dir_fd: int, name: str) -> None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def _replace(self, dir_fd: int, write: FileWrite) -> None:
        """Write a whole file via a temp file and rename, so a crash leaves the old or
        the new content (``*.tmp`` leftovers are removed on open)."""
        tmp = write.name + ".tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644, dir_fd=dir_fd
        )
        try:
            _pwrite_all(fd, write.data, 0)
            self._fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, write.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        self._fsync(dir_fd)


def _pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class RollFlushes:
    """One log's roll flushes not yet known to be done, oldest first, each with the base
    offset of the segment it writes. The flusher runs jobs in order, so the newest one
    done means every earlier one is. A failed one is kept: the log's durability paths
    keep reporting it. The log calls these under its lock; ``wait`` needs no lock."""

    def __init__(self, flusher: RollFlusher, *, max_unflushed: int) -> None:
        self._flusher = flusher
        self._max_unflushed = max_unflushed
        self._flushes: list[tuple[int, RollFlushJob, Future[int]]] = []

    def submit(self, segment_base: int, job: RollFlushJob) -> Future[int]:
        """Queue ``job``; first wait for the oldest flushes while ``max_unflushed`` of this
        log's are outstanding (back-pressure, as the synchronous flush gave: a log that
        rolls faster than its segments reach the disk waits)."""
        while len(unflushed := self._unflushed()) >= self._max_unflushed:
            oldest = unflushed[0][2]
            wait([oldest])
            if oldest.exception() is not None:
                break
        future = self._flusher.submit(job)
        self._flushes.append((segment_base, job, future))
        return future

    def _unflushed(self) -> list[tuple[int, RollFlushJob, Future[int]]]:
        flushes = self._flushes
        while flushes and flushes[0][2].done() and flushes[0][2].exception() is None:
            flushes.pop(0)
        return flushes

    def oldest_base(self) -> int | None:
        """The base offset of the oldest segment whose flush runs (or failed), if any."""
        unflushed = self._unflushed()
        return unflushed[0][0] if unflushed else None

    def pending(self) -> Future[int] | None:
        """The newest flush while any runs, or the one that failed; else None."""
        unflushed = self._unflushed()
        if not unflushed:
            return None
        failed = [f for _, _, f in unflushed if f.done() and f.exception() is not None]
        return failed[0] if failed else unflushed[-1][2]

    def wait(self, *, check: bool = True) -> None:
        """Block until every flush is done; with ``check``, raise the ``OSError`` of one
        that failed."""
        for _, _, future in list(self._flushes):
            if check:
                future.result()
            else:
                wait([future])

    def cancel(self) -> None:
        """The log was released: every job stops after the step it is in."""
        for _, job, _ in self._flushes:
            job.cancel()


_shared: RollFlusher | None = None
_shared_lock = threading.Lock()


def shared_flusher() -> RollFlusher:
    """The process's default flusher (one thread, created on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = RollFlusher()
        return _shared


def open_directory(path: os.PathLike[str] | str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
