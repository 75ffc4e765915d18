"""errors.retry.* back-off and errors.tolerance, on an injected clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncelog.connect.api.errors import ConnectException, DataException, RetriableException
from oncelog.connect.runtime.error_handling import ErrorPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def _failing(times: int, result: str = "ok") -> tuple[Callable[[], str], list[int]]:
    calls = [0]

    def op() -> str:
        calls[0] += 1
        if calls[0] <= times:
            raise RetriableException(f"attempt {calls[0]}")
        return result

    return op, calls


def _retry(policy: ErrorPolicy, op: Callable[[], str], clock: Clock) -> str:
    return policy.retrying(op, clock=clock, sleep=clock.sleep, jitter=lambda bound: bound // 2)


def test_no_retry_by_default() -> None:
    clock = Clock()
    op, calls = _failing(1)
    with pytest.raises(RetriableException, match="attempt 1"):
        _retry(ErrorPolicy(), op, clock)
    assert calls == [1] and clock.sleeps == []


def test_exponential_back_off_until_success() -> None:
    clock = Clock()
    op, calls = _failing(2)
    assert _retry(ErrorPolicy(retry_timeout_ms=10_000), op, clock) == "ok"
    assert calls == [3] and clock.sleeps == [0.3, 0.6]


def test_back_off_is_cut_at_the_deadline_and_capped() -> None:
    clock = Clock()
    op, calls = _failing(100)
    with pytest.raises(RetriableException, match="attempt 4"):
        _retry(ErrorPolicy(retry_timeout_ms=1000), op, clock)
    assert clock.sleeps == [0.3, 0.6, 0.1]  # the last wait ends at the deadline
    capped = Clock()
    op, _ = _failing(3)
    _retry(ErrorPolicy(retry_timeout_ms=-1, retry_max_delay_ms=500), op, capped)
    assert capped.sleeps == [0.3, 0.25, 0.25]  # above the cap: a random delay below it


def test_other_errors_are_not_retried_and_tolerance() -> None:
    clock = Clock()

    def bad() -> str:
        raise DataException("not JSON")

    with pytest.raises(DataException):
        _retry(ErrorPolicy(retry_timeout_ms=-1), bad, clock)
    assert clock.sleeps == []
    with pytest.raises(ConnectException, match="Tolerance exceeded in error handler: not JSON"):
        ErrorPolicy().tolerate("task-0", DataException("not JSON"), "rec")
    ErrorPolicy(tolerate_all=True, log_errors=True).tolerate(
        "task-0", DataException("not JSON"), "rec"
    )
    policy = ErrorPolicy.from_config(
        {"errors.tolerance": "all", "errors.retry.timeout": "-1", "errors.retry.delay.max.ms": "10"}
    )
    assert (policy.tolerate_all, policy.retry_timeout_ms, policy.retry_max_delay_ms) == (
        True,
        -1,
        10,
    )
