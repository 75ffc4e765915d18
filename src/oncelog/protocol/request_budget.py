"""A broker-wide bound on requests received but not yet served.

Kafka's ``queued.max.requests`` (500) and ``queued.max.request.bytes`` (-1, none)
bound its request queue; once full, network threads stop reading. Here the queue is
the frames every connection's parser has cut but its connection has not dispatched
yet: while the budget is spent, a connection that still holds queued frames stops
reading, and resumes once it has served them. A connection with nothing queued may
always read, so no connection waits on another's progress (no deadlock).

The byte bound also covers frames still arriving: a small frame's bytes are counted as
they arrive, and a large frame's buffer grows as its bytes come, each growth
``reserve``d first. Beyond the bound one connection at a
time may overdraw (as Kafka's memory pool lets one allocation overshoot), so some frame
always completes; the others wait, unread, until memory is given back. Memory held is
thus at most the bound plus one frame (``socket.request.max.bytes``).
"""

from __future__ import annotations

from collections.abc import Callable


class RequestBudget:
    def __init__(self, max_requests: int = 500, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # -1: no bound, as in Kafka
        self.requests = 0
        self.bytes = 0
        self.overdraft: object | None = None  # the one connection allowed past max_bytes
        self._waiting: dict[object, Callable[[], None]] = {}

    def take(self, requests: int, nbytes: int) -> None:
        """Frames cut, and the change in bytes held (negative when a partial frame
        moved into a buffer ``reserve``d for it)."""
        self.requests += requests
        self.bytes += nbytes
        if nbytes < 0:
            self._notify()

    def give(self, requests: int, nbytes: int) -> None:
        self.requests -= requests
        self.bytes -= nbytes
        if nbytes > 0:
            self._notify()

    @property
    def spent(self) -> bool:
        return self.requests >= self.max_requests or 0 <= self.max_bytes <= self.bytes

    def reserve(self, owner: object, nbytes: int, retry: Callable[[], None]) -> bool:
        """Memory for a frame still arriving; refused, ``retry`` is called once memory
        may be had again."""
        over = 0 <= self.max_bytes < self.bytes + nbytes
        if over and self.overdraft not in (None, owner):
            self._waiting[owner] = retry
            return False
        if over:
            self.overdraft = owner
        self.bytes += nbytes
        return True

    def end_overdraft(self, owner: object) -> None:
        """``owner``'s overdrawn frame was served (or its connection closed)."""
        self._waiting.pop(owner, None)
        if self.overdraft is owner:
            self.overdraft = None
            self._notify()

    def _notify(self) -> None:
        if self._waiting and (self.overdraft is None or self.bytes < self.max_bytes):
            waiting, self._waiting = self._waiting, {}
            for retry in waiting.values():
                retry()
