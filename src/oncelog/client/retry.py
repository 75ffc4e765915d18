"""The one retry policy of the client layer: exponential backoff under a deadline.

Retried: ``ClientError`` whose code is retriable (NOT_COORDINATOR,
CONCURRENT_TRANSACTIONS, ...) and connection failures (``OSError``). Everything else
(PRODUCER_FENCED, TRANSACTIONAL_ID_NOT_FOUND, authentication, bad configuration) fails at
once. When the deadline passes, the last error is raised: a ClientError as it was, a
connection failure as a ClientError with NETWORK_EXCEPTION.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity
from kio.schema.errors import ErrorCode

from oncelog.client.errors import ClientError

T = TypeVar("T")


def is_retriable(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        return exc.retriable
    return isinstance(exc, OSError)  # refused, reset, timed out: ConnectionError is one


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    deadline_s: float = 60.0
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 1.0

    def call(
        self, fn: Callable[[], T], *, on_retry: Callable[[BaseException], None] | None = None
    ) -> T:
        """fn() until it returns, a non-retriable error, or the deadline. ``on_retry`` runs
        before each new attempt with the error (e.g. to drop a broken connection)."""

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None:
                exc = state.outcome.exception()
                if exc is not None:
                    on_retry(exc)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_retriable),
            stop=tenacity.stop_before_delay(self.deadline_s),
            wait=tenacity.wait_exponential(
                multiplier=self.initial_backoff_s, max=self.max_backoff_s
            ),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(fn)
        except OSError as exc:
            raise ClientError(
                f"cannot reach the cluster: {exc}", ErrorCode.network_exception
            ) from exc


DEFAULT_POLICY = RetryPolicy()
