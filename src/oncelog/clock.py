"""Wall-clock milliseconds, the unit of every Kafka timestamp and timeout."""

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""What services are given to read the time (wall-clock ms); tests inject their own."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000
