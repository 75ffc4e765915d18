"""A follower's task configs on their way to the leader, off the herder thread.

Connectors generate task configs where they run; only the leader writes them. A
follower sends them to the leader's internal ``PUT /connectors/{c}/tasks`` on an
executor of its own, as Kafka's ``DistributedHerder`` does with its forward-request
executor, so a slow or refused request never holds the herder thread (whose ticks
rejoin the group when a rebalance starts). A failed send is retried after a backoff
that doubles from 250 ms to 60 s (``reconfigureConnectorTasksWithExponentialBackoffRetries``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from oncelog.connect.api.connector import Config

log = logging.getLogger(__name__)

INITIAL_BACKOFF_S = 0.25
MAX_BACKOFF_S = 60.0

Send = Callable[[str, list[Config]], None]


@dataclass
class _Attempt:
    configs: list[Config]
    future: concurrent.futures.Future[None]
    backoff_s: float


class TaskConfigSender:
    def __init__(self, send: Send, clock: Callable[[], float] = time.monotonic) -> None:
        self._send = send
        self._clock = clock
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "task-config-sender")
        self._attempts: dict[str, _Attempt] = {}
        self._retry_at: dict[str, tuple[float, float]] = {}  # connector -> (when, backoff)

    def busy(self, connector: str) -> bool:
        """A send is in flight, or a failed one waits for its backoff."""
        if connector in self._attempts:
            return True
        retry = self._retry_at.get(connector)
        return retry is not None and self._clock() < retry[0]

    def send(self, connector: str, configs: list[Config]) -> None:
        backoff = self._retry_at.pop(connector, (0.0, INITIAL_BACKOFF_S / 2))[1]
        future = self._executor.submit(self._send, connector, configs)
        self._attempts[connector] = _Attempt(configs, future, min(MAX_BACKOFF_S, backoff * 2))

    def completed(self) -> list[str]:
        """Connectors whose configs reached the leader since the last call; a failure
        is logged and scheduled for another try (the caller generates again)."""
        done: list[str] = []
        for connector, attempt in list(self._attempts.items()):
            if not attempt.future.done():
                continue
            del self._attempts[connector]
            error = attempt.future.exception()
            if error is None:
                done.append(connector)
                continue
            log.warning(
                "task configs of %s not sent to the leader yet (%s); retrying in %.0f ms",
                connector,
                error,
                attempt.backoff_s * 1000,
            )
            self._retry_at[connector] = (self._clock() + attempt.backoff_s, attempt.backoff_s)
        return done

    def cancel(self, connector: str) -> None:
        self._retry_at.pop(connector, None)
        attempt = self._attempts.pop(connector, None)
        if attempt is not None:
            attempt.future.cancel()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
