"""A tiny metrics registry: named gauges (callables) and counters.

Later exposed over HTTP; for now read by the CLI and tests.
"""

from __future__ import annotations

from collections.abc import Callable


class Registry:
    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.gauges: dict[str, Callable[[], float | int | dict[str, float | int]]] = {}

    def inc(self, name: str, amount: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + amount

    def gauge(self, name: str, fn: Callable[[], float | int | dict[str, float | int]]) -> None:
        self.gauges[name] = fn

    def snapshot(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.counters)
        for name, fn in self.gauges.items():
            out[name] = fn()
        return out
