"""Requests the REST API hands the herder thread, and when each may run.

As Kafka's ``DistributedHerder``, requests run on the herder thread between rebalances:

- ``WRITE`` (create, reconfigure, delete, stop, task configs, fencing): waits while a
  rebalance is under way or due, then runs on the leader; elsewhere it fails with
  :class:`NotLeaderError` and the REST layer forwards it. Nothing answers 409 just
  because the cluster is rebalancing.
- ``SETTLED`` (restarts, offset changes): 409 when a rebalance is due and has not
  started (``checkRebalanceNeeded``: the request would act on a stale assignment);
  otherwise as ``WRITE``.
- ``LOCAL`` (reads to the end of a topic, a restart of a task running here): runs at
  the next tick whatever the group is doing.

A request whose caller gave up (the REST request timed out and cancelled the future)
is dropped.
"""

from __future__ import annotations

import concurrent.futures
import enum
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed.errors import NotLeaderError, RebalanceNeeded

T = TypeVar("T")


class Kind(enum.Enum):
    WRITE = "write"
    SETTLED = "settled"
    LOCAL = "local"


@dataclass
class _Request:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]
    kind: Kind


@dataclass(frozen=True)
class GroupView:
    """What the herder knows of the group when it serves requests."""

    rebalancing: bool  # a join is under way or the last one failed
    rebalance_due: bool  # config changes (or a revocation) call for one
    leader_url: str | None
    is_leader: bool


class RequestQueue:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[_Request] = deque()

    def submit(self, fn: Callable[[], T], kind: Kind) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            self._queue.append(_Request(fn, future, kind))
        return future

    def serve(self, group: GroupView) -> None:
        """Run what may run now, in order; keep the rest for the next tick."""
        with self._lock:
            pending, self._queue = self._queue, deque()
        waiting: deque[_Request] = deque()
        for request in pending:
            if request.future.cancelled():
                continue
            if request.kind is not Kind.LOCAL:
                if request.kind is Kind.SETTLED and group.rebalance_due and not group.rebalancing:
                    _fail(request, RebalanceNeeded())
                    continue
                if group.rebalancing or group.rebalance_due or group.leader_url is None:
                    waiting.append(request)
                    continue
                if not group.is_leader:
                    _fail(request, NotLeaderError(group.leader_url))
                    continue
            if not request.future.set_running_or_notify_cancel():
                continue
            try:
                request.future.set_result(request.fn())
            except BaseException as exc:
                request.future.set_exception(exc)
        with self._lock:
            self._queue = waiting + self._queue

    def fail_all(self, error: ConnectRestException) -> None:
        with self._lock:
            pending, self._queue = self._queue, deque()
        for request in pending:
            _fail(request, error)


def _fail(request: _Request, error: BaseException) -> None:
    if request.future.set_running_or_notify_cancel():
        request.future.set_exception(error)
