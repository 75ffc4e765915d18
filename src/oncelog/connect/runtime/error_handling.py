"""``errors.retry.timeout`` / ``errors.retry.delay.max.ms`` / ``errors.tolerance`` /
``errors.log.enable`` for the task loops.

A stage (conversion, transformation) that raises ``RetriableException`` is retried
with exponential back-off from 300 ms, capped by ``errors.retry.delay.max.ms``, until
``errors.retry.timeout`` has passed (0: no retry, -1: forever), as Kafka's
``RetryWithToleranceOperator`` does. What still fails is then tolerated or not.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from oncelog.connect.api.errors import ConnectException, RetriableException

T = TypeVar("T")
RETRY_DELAY_MIN_MS = 300

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorPolicy:
    tolerate_all: bool = False  # errors.tolerance=all
    log_errors: bool = False  # errors.log.enable
    log_messages: bool = False  # errors.log.include.messages
    retry_timeout_ms: int = 0  # errors.retry.timeout (-1: forever)
    retry_max_delay_ms: int = 60_000  # errors.retry.delay.max.ms

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ErrorPolicy:
        return cls(
            config.get("errors.tolerance", "none") == "all",
            config.get("errors.log.enable", "false").lower() == "true",
            config.get("errors.log.include.messages", "false").lower() == "true",
            int(config.get("errors.retry.timeout", "0")),
            int(config.get("errors.retry.delay.max.ms", "60000")),
        )

    def retrying(
        self,
        operation: Callable[[], T],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[int], int] = lambda bound: random.randrange(max(bound, 1)),
    ) -> T:
        """Run ``operation``, retrying ``RetriableException`` within the retry timeout."""
        start_ms = clock() * 1000
        deadline_ms = (
            float("inf") if self.retry_timeout_ms < 0 else start_ms + self.retry_timeout_ms
        )
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except RetriableException:
                now_ms = clock() * 1000
                if now_ms >= deadline_ms:
                    raise
                delay = RETRY_DELAY_MIN_MS << min(attempt - 1, 30)
                if delay > self.retry_max_delay_ms:
                    delay = jitter(self.retry_max_delay_ms)
                sleep(min(delay, deadline_ms - now_ms) / 1000)

    def tolerate(self, task: object, error: Exception, record: object) -> None:
        """Raise unless errors are tolerated; log the skipped record if asked to."""
        if not self.tolerate_all:
            raise ConnectException(f"Tolerance exceeded in error handler: {error}") from error
        if self.log_errors:
            detail = f" {record}" if self.log_messages else ""
            log.error("%s: skipping a record after error: %s%s", task, error, detail)


NO_TOLERANCE = ErrorPolicy()
