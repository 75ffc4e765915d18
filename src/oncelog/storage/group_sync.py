"""Durable acknowledgements with group commit: one fdatasync per log covers every append
waiting at that moment, and it runs in a worker thread, never on the event loop.

A single node has no replica to recover an acknowledged write from, so with
``oncelog.flush.on.ack`` an ``acks=all`` produce, a coordinator's record and a transaction
marker are answered only once ``wait`` returns for the logs they wrote. While one sync
runs, new waiters queue up; the next sync takes them all at once, so the number of
fdatasyncs follows the disk's speed, not the request rate.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Protocol, TypeVar

from oncelog import hooks
from oncelog.storage.errors import LogClosedError


class SyncableLog(Protocol):
    """What a group fdatasync needs of a log (``UnifiedLog`` is one)."""

    @property
    def durable_offset(self) -> int: ...

    def sync_target(self) -> tuple[int, int, Future[int] | None]: ...

    def mark_durable(self, offset: int) -> None: ...


_Log = TypeVar("_Log", bound=SyncableLog)


log = logging.getLogger(__name__)

FileSync = Callable[[int], None]
"""Makes one file's written data durable (``os.fdatasync``; tests inject a slower one)."""


def fdatasync(fd: int) -> None:
    """``os.fdatasync`` after the ``group_sync.fsync`` test hook (which may hold it, so a
    test can prove no acknowledgement leaves before it)."""
    hooks.point("group_sync.fsync", fd=fd)
    os.fdatasync(fd)


class GroupSync:
    def __init__(self, fsync: FileSync = fdatasync) -> None:
        self._fsync = fsync
        self._queued: set[SyncableLog] = set()
        self._waiters: list[asyncio.Future[None]] = []
        self._runner: asyncio.Task[None] | None = None
        self.syncs = 0  # fdatasync rounds done (each covers every log queued at its start)

    async def wait(self, targets: Mapping[_Log, int]) -> None:
        """Return once every ``log`` holds ``end`` (an end offset it has reached) durably.
        Raises ``OSError`` if the sync failed: the caller must not acknowledge."""
        logs = [part for part, end in targets.items() if part.durable_offset < end]
        if not logs:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        self._queued.update(logs)
        if self._runner is None:
            self._runner = loop.create_task(self._run())
        await asyncio.shield(waiter)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                waiters, self._waiters = self._waiters, []
                logs, self._queued = self._queued, set()
                # Captured on the loop: each log's active segment and its end right now,
                # which is at or past every waiter's target, and the flush of the segment
                # it rolled last, if that still runs (older segments are durable once it is).
                targets = []
                rolls = []
                for part in logs:
                    try:
                        fd, end, roll = part.sync_target()
                    except LogClosedError:
                        continue  # its topic was deleted meanwhile: nothing left to make durable
                    targets.append((part, fd, end))
                    if roll is not None:
                        rolls.append(asyncio.wrap_future(roll))
                try:
                    # One worker per file: the disk merges concurrent fdatasyncs into fewer
                    # journal commits (about 2x faster than one after another, 3 logs).
                    await asyncio.gather(
                        *rolls,
                        *(loop.run_in_executor(None, self._fsync, fd) for _, fd, _ in targets),
                    )
                except OSError as exc:
                    log.error(
                        "fdatasync failed; %d acknowledgements withheld: %s", len(waiters), exc
                    )
                    for w in waiters:
                        if not w.done():
                            w.set_exception(exc)
                    continue
                self.syncs += 1
                for part, _, end in targets:
                    part.mark_durable(end)
                for w in waiters:
                    if not w.done():
                        w.set_result(None)
        finally:
            self._runner = None
