"""Event-loop stall watchdog: notices when the loop stops turning and says where it is stuck.

Every client waits while the broker's one asyncio loop is held, so a stall is the broker's
worst latency, and by the time anyone looks the stack that caused it is gone. A callback on
the loop stamps the time every ``BEAT_S``; a daemon thread reads the stamp. Once a stall
passes the threshold, the thread logs the loop thread's stack (what holds the loop); when
the loop turns again, the beat logs how long the stall lasted and the garbage collections
that ran inside it. The figures feed the metrics endpoint.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

BEAT_S = 0.05
# Where a slow beat counts as lag: below it, the lag is the loop's ordinary jitter.
LAG_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(slots=True)
class GcFigures:
    """Collections per generation and their pauses, from ``gc.callbacks``."""

    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    pause_s: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    max_pause_s: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])


@dataclass(slots=True)
class LoopFigures:
    """What a scrape reports: lag histogram, stalls over the threshold, GC pauses."""

    lag_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS_S) + 1))
    lag_total_s: float = 0.0
    max_lag_s: float = 0.0
    stalls: int = 0
    gc: GcFigures = field(default_factory=GcFigures)


class LoopWatchdog:
    def __init__(self, warn_after_s: float) -> None:
        self.warn_after_s = warn_after_s
        self.figures = LoopFigures()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._last_beat = 0.0
        self._reported_at = 0.0  # the beat a stall was reported after; 0: none open
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gc_started = 0.0
        # (monotonic end, generation, pause) of recent collections, for the stall report.
        self._recent_gcs: list[tuple[float, int, float]] = []

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._loop_native_id = threading.get_native_id()
        self._last_beat = time.monotonic()
        self._schedule(self._last_beat)
        gc.callbacks.append(self._on_gc)
        if self.warn_after_s > 0:
            self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        f = self.figures
        log.info(
            "event loop: max lag %.0f ms, %d stalls over %.0f ms; garbage collections "
            "gen0/1/2: %s, pauses %s ms, longest %s ms",
            f.max_lag_s * 1000,
            f.stalls,
            self.warn_after_s * 1000,
            "/".join(str(n) for n in f.gc.collections),
            "/".join(f"{s * 1000:.0f}" for s in f.gc.pause_s),
            "/".join(f"{s * 1000:.0f}" for s in f.gc.max_pause_s),
        )

    # -- on the loop -----------------------------------------------------------------------
    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + BEAT_S
        self._handle = self._loop.call_at(self._loop.time() + BEAT_S, self._beat)

    def _beat(self) -> None:
        now = time.monotonic()
        lag = max(0.0, now - self._due)
        self._record_lag(lag)
        reported = self._reported_at
        if reported and reported == self._last_beat:
            held = now - self._last_beat
            log.warning(
                "event loop stall over: held %.0f ms; garbage collections in it: %s",
                held * 1000,
                self._gcs_since(self._last_beat),
            )
            self._reported_at = 0.0
        self._last_beat = now
        if not self._stop.is_set():
            self._schedule(now)

    def _record_lag(self, lag: float) -> None:
        f = self.figures
        for i, bound in enumerate(LAG_BUCKETS_S):
            if lag <= bound:
                f.lag_counts[i] += 1
                break
        else:
            f.lag_counts[-1] += 1
        f.lag_total_s += lag
        f.max_lag_s = max(f.max_lag_s, lag)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._gc_started = now
            return
        gen = int(info.get("generation", 0))
        pause = now - self._gc_started if self._gc_started else 0.0
        f = self.figures.gc
        f.collections[gen] += 1
        f.pause_s[gen] += pause
        f.max_pause_s[gen] = max(f.max_pause_s[gen], pause)
        if gen == 2 or pause > 0.01:  # only what a stall report could name
            self._recent_gcs.append((now, gen, pause))
            if len(self._recent_gcs) > 64:
                del self._recent_gcs[:32]

    def _gcs_since(self, since: float) -> str:
        gcs = [f"gen{g} {p * 1000:.0f} ms" for end, g, p in self._recent_gcs if end >= since]
        return ", ".join(gcs) if gcs else "none"

    # -- on the watchdog thread ---------------------------------------------------------------
    def _watch(self) -> None:
        interval = min(0.1, self.warn_after_s / 4)
        while not self._stop.wait(interval):
            last = self._last_beat
            held = time.monotonic() - last
            if held < self.warn_after_s or self._reported_at == last:
                continue
            self._reported_at = last
            self.figures.stalls += 1
            frame = sys._current_frames().get(self._loop_thread)
            kernel = kernel_wait(self._loop_native_id)
            if self._last_beat != last:  # read too late: it is not the stall's state
                kernel = "\n  kernel: the loop moved on before its kernel state was read"
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "(gone)\n"
            log.warning(
                "event loop held for %.0f ms so far; the loop thread is at:\n%s%s",
                held * 1000,
                stack.rstrip(),
                kernel,
            )


def kernel_wait(native_id: int) -> str:
    """Where a thread waits in the kernel (Linux): its state, its wait channel and, when
    the process may read it (root), its kernel stack. A loop held inside a system call
    (a pwrite throttled by dirty-page writeback, a journal wait) shows a Python stack
    that ends at the call; this says what the call waits for."""
    base = f"/proc/self/task/{native_id}"
    parts = []
    try:
        with open(f"{base}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
        with open(f"{base}/wchan") as f:
            wchan = f.read().strip() or "-"
    except OSError:
        return ""
    parts.append(f"\n  kernel: state {state}, waiting in {wchan}")
    try:
        with open(f"{base}/stack") as f:
            kernel_stack = f.read().strip()
    except OSError:
        kernel_stack = ""  # needs CAP_SYS_ADMIN
    if kernel_stack:
        parts.append("\n    " + kernel_stack.replace("\n", "\n    "))
    return "".join(parts)
