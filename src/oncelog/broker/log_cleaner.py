"""The broker's log cleaner: threads that compact the dirtiest compacted logs.

Each of ``log.cleaner.threads`` threads loops: pick the log with the highest
dirty ratio at or above its ``min.cleanable.dirty.ratio`` (or overdue by
``max.compaction.lag.ms``; failing that, one whose delete horizon has passed),
run one pass on it (storage/compaction.py), else sleep ``log.cleaner.backoff.ms``.
A log is cleaned by one thread at a time. The passes never run on the event
loop: they take the log's lock only to plan and to swap a group in.
``log.cleaner.io.max.bytes.per.second`` throttles all threads together.
A log whose pass fails is left alone until restart (Kafka marks it uncleanable).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from oncelog import hooks
from oncelog.broker.cleaner_config import DOUBLE_MAX, CleanerSettings
from oncelog.storage.cleaner_manager import horizon_due, is_due
from oncelog.storage.cleaner_process import CleanerProcess
from oncelog.storage.compaction import compact_log
from oncelog.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)


class _Stopped(Exception):
    pass


class _Throttler:
    """Keeps the cleaners' combined I/O under a byte rate (sleeping the caller)."""

    def __init__(self, rate: float, stop: threading.Event) -> None:
        self.rate = rate
        self.stop = stop
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0

    def __call__(self, nbytes: int) -> None:
        if self.stop.is_set():
            raise _Stopped
        if self.rate >= DOUBLE_MAX:
            return
        with self._lock:
            self._bytes += nbytes
            elapsed = time.monotonic() - self._start
            wait = self._bytes / self.rate - elapsed
            if elapsed > 1.0:  # a fresh window each second
                self._start, self._bytes = time.monotonic(), 0
        if wait > 0:
            self.stop.wait(wait)


LogSource = Callable[[], Iterable[tuple[str, UnifiedLog]]]


class _TopicLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[UnifiedLog]: ...


def partition_logs(topics: Mapping[str, _TopicLike]) -> list[tuple[str, UnifiedLog]]:
    """("<topic>-<partition>", log) of every partition (a snapshot of the registry)."""
    return [(f"{t.name}-{i}", p) for t in list(topics.values()) for i, p in enumerate(t.partitions)]


class LogCleaner:
    def __init__(
        self,
        settings: CleanerSettings,
        logs: LogSource,
        *,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.settings = settings
        self._logs = logs
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_progress: set[int] = set()  # id() of logs being cleaned
        self._uncleanable: set[int] = set()
        self._throttle = _Throttler(settings.io_max_bytes_per_second, self._stop)
        self._threads: list[threading.Thread] = []
        self.passes = 0  # completed passes, for tests and metrics
        # Totals over completed passes, for the metrics endpoint (written under _lock).
        self.bytes_read = 0
        self.bytes_written = 0
        self.records_removed = 0
        self.last_pass_s = 0.0
        self.max_pass_s = 0.0

    @property
    def uncleanable_count(self) -> int:
        """Logs a failed pass left uncleaned until restart (Kafka's uncleanable-partitions-count)."""
        with self._lock:
            return len(self._uncleanable)

    def start(self) -> None:
        if not self.settings.enabled:
            return
        for i in range(self.settings.thread_count):
            t = threading.Thread(target=self._run, name=f"log-cleaner-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def stop(self) -> None:
        """Abort passes in flight (their files are discarded) and join the threads."""
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads.clear()

    def reconfigure(self, settings: CleanerSettings) -> None:
        """New settings (a dynamic broker config changed): as Kafka's LogCleaner.reconfigure,
        the threads stop (a pass in flight is abandoned, its files discarded) and start
        again with them. Blocks while passes abort: call it off the event loop."""
        running = bool(self._threads)
        self.stop()
        self.settings = settings
        self._stop = threading.Event()
        self._throttle = _Throttler(settings.io_max_bytes_per_second, self._stop)
        if running:
            self.start()

    # -- one thread ------------------------------------------------------------------------

    def _run(self) -> None:
        worker = CleanerProcess()  # the pass itself runs there, off this process's GIL
        try:
            while not self._stop.is_set():
                picked = self._grab()
                if picked is None:
                    self._stop.wait(self.settings.backoff_ms / 1000)
                    continue
                name, plog = picked
                try:
                    self._clean(name, plog, worker)
                finally:
                    with self._lock:
                        self._in_progress.discard(id(plog))
        finally:
            worker.close()

    def _grab(self) -> tuple[str, UnifiedLog] | None:
        """The filthiest due log no other thread is cleaning (Kafka's grabFilthiestCompactedLog)."""
        now = self._clock()
        best: tuple[float, str, UnifiedLog] | None = None
        horizon: tuple[str, UnifiedLog] | None = None
        with self._lock:
            for name, plog in self._logs():
                if id(plog) in self._in_progress or id(plog) in self._uncleanable:
                    continue
                try:
                    d = plog.dirtiness(now)
                except Exception:  # closed or deleted meanwhile
                    continue
                if d is None:
                    continue
                if is_due(d, plog.config):
                    if best is None or d.ratio > best[0]:
                        best = (d.ratio, name, plog)
                elif horizon is None and horizon_due(d, plog.pending_delete_horizon, now):
                    horizon = (name, plog)
            picked = (best[1], best[2]) if best is not None else horizon
            if picked is not None:
                self._in_progress.add(id(picked[1]))
        return picked

    def _clean(self, name: str, plog: UnifiedLog, worker: CleanerProcess) -> None:
        started = time.monotonic()
        try:
            stats = compact_log(
                plog,
                now_ms=self._clock(),
                dedupe_buffer_bytes=self.settings.dedupe_buffer_bytes // self.settings.thread_count,
                pace=self._throttle,
                on_stage=self._on_stage,
                run=worker.run,
            )
        except _Stopped:
            return
        except Exception:
            if plog.closed:
                return  # the topic was deleted or the broker is stopping
            log.exception("log cleaner failed on %s; leaving it uncleaned until restart", name)
            with self._lock:
                self._uncleanable.add(id(plog))
            return
        if stats is None:
            return
        took = time.monotonic() - started
        with self._lock:
            self.passes += 1
            self.bytes_read += stats.bytes_read
            self.bytes_written += stats.bytes_written
            self.records_removed += stats.records_removed
            self.last_pass_s = took
            self.max_pass_s = max(self.max_pass_s, took)
        log.info(
            "cleaned %s up to offset %d in %.2f s: %d -> %d bytes, %d records kept, %d removed",
            name,
            stats.map_end_offset,
            took,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_kept,
            stats.records_removed,
        )

    def _on_stage(self, stage: str) -> None:
        delay = hooks.delay_ms("cleaner.stage", stage=stage)
        if delay > 0:
            log.warning("debug: cleaner pausing %d ms at stage %s", delay, stage)
            self._stop.wait(delay / 1000)
        if self._stop.is_set():
            raise _Stopped
