"""Wakes long-polling fetches when data is appended to a partition."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}

    def notify(self, key: PartitionKey) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, keys: Iterable[PartitionKey], timeout: float) -> bool:
        """Wait until any of ``keys`` is appended to, or ``timeout`` seconds pass."""
        if timeout <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                s = self._waiters.get(key)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[key]
