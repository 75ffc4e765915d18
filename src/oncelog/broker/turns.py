"""Turns for connections with a backlog: fresh requests first, pipelined work in slices.

A connection whose next request is already queued (a pipelining client) does not go on
at once: it waits for a turn. Turns are handed out round-robin, once per event-loop
iteration, as many as fit in a time slice at the measured cost of a backlogged request.
A request arriving on a connection that had nothing queued is served as soon as the loop
sees its bytes, so it waits for about one slice of other clients' backlog, however many
clients pipeline and however many requests each has queued (Kafka gets the same from
muting a channel per in-flight request and a FIFO request queue served by threads).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

# Backlogged work per event-loop iteration; I/O is polled between slices.
SLICE_S = 0.002
_MIN_COST_S = 0.000_01  # keeps a batch finite when requests cost next to nothing


class TurnScheduler:
    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self.cost_s = 0.000_2  # running estimate of one backlogged request
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._handle: asyncio.Handle | None = None
        self._released = 0  # turns the previous release handed out
        self._released_at = 0.0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def turn(self) -> None:
        """Wait until this connection may serve its next queued request."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiting.append(fut)
        if self._handle is None:
            self._released = 0  # no batch is running: nothing to measure
            self._handle = loop.call_soon(self._release)
        await fut  # cancelled with its connection: ``_release`` skips it

    def _release(self) -> None:
        now = time.perf_counter()
        if self._released:
            # The batch let go by the previous call ran since (its tasks were scheduled
            # before this call), along with any fresh requests: their cost together
            # sizes the next batch, so fresh work shrinks the backlog's share.
            per_turn = (now - self._released_at) / self._released
            self.cost_s += (per_turn - self.cost_s) / 4
        batch = max(1, int(self.slice_s / max(self.cost_s, _MIN_COST_S)))
        released = 0
        while released < batch and self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                released += 1
        if self._waiting:
            self._handle = asyncio.get_running_loop().call_soon(self._release)
            self._released = released
            self._released_at = time.perf_counter()
        else:
            self._handle = None
            self._released = 0
