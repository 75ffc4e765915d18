"""A broker-wide bound on requests received but not yet served.

Kafka's ``queued.max.requests`` (500) and ``queued.max.request.bytes`` (-1, none)
bound its request queue; once full, network threads stop reading. Here the queue is
the frames every connection's parser has cut but its connection has not dispatched
yet: while the budget is spent, a connection that still holds queued frames stops
reading, and resumes once it has served them. A connection with nothing queued may
always read, so no connection waits on another's progress (no deadlock).
"""

from __future__ import annotations


class RequestBudget:
    def __init__(self, max_requests: int = 500, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # -1: no bound, as in Kafka
        self.requests = 0
        self.bytes = 0

    def take(self, requests: int, nbytes: int) -> None:
        self.requests += requests
        self.bytes += nbytes

    def give(self, requests: int, nbytes: int) -> None:
        self.requests -= requests
        self.bytes -= nbytes

    @property
    def spent(self) -> bool:
        return self.requests >= self.max_requests or 0 <= self.max_bytes <= self.bytes
