"""Client faults in the broker log: the first of each kind at once, then counts.

A client's bad bytes (a connection closed on an invalid request, a framing error, a
produce partition refused) are its own fault, not the broker's: Kafka logs such closes
at DEBUG. One INFO line per fault cost a protocol fuzzer's broker a 300 MB log in 30
minutes (1.37M closed connections), written synchronously on the event loop. So each
kind is logged in full the first time in a window; later ones are counted (and logged
at DEBUG) and one summary line per window says how many followed. The window closes at
the next fault after it ends, or at ``flush`` (housekeeping, shutdown).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

WINDOW_S = 60.0


class ClientFaultLog:
    def __init__(
        self,
        log: logging.Logger,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self.window_s = window_s
        self._clock = clock
        self._window_end = 0.0
        self._counts: dict[str, int] = {}  # kind -> faults in the current window
        self.total: dict[str, int] = {}  # kind -> faults since start

    def note(self, kind: str, level: int, msg: str, *args: object) -> None:
        """One fault of ``kind``; ``msg % args`` describes it."""
        now = self._clock()
        if now >= self._window_end:
            self._summarise()
            self._window_end = now + self.window_s
        seen = self._counts.get(kind, 0)
        self._counts[kind] = seen + 1
        self.total[kind] = self.total.get(kind, 0) + 1
        if seen == 0:
            self._log.log(level, msg, *args)
        elif self._log.isEnabledFor(logging.DEBUG):
            self._log.debug(msg, *args)

    def flush(self) -> None:
        """Close the window if it has ended (called by housekeeping)."""
        if self._clock() >= self._window_end:
            self._summarise()

    def close(self) -> None:
        """At shutdown: the last window's summary."""
        self._summarise()

    def _summarise(self) -> None:
        more = {kind: n - 1 for kind, n in self._counts.items() if n > 1}
        self._counts = {}
        if more:
            self._log.info(
                "client faults not logged one by one in the last %.0f s: %s (totals: %s)",
                self.window_s,
                ", ".join(f"{n} more {kind}" for kind, n in sorted(more.items())),
                ", ".join(f"{n} {kind}" for kind, n in sorted(self.total.items())),
            )
