"""How many connections the broker accepts, and when it closes idle ones, with Kafka's
settings and defaults (Kafka's ``SocketServer.ConnectionQuotas`` and the idle expiry
of its ``Selector``):

- ``max.connections`` (all listeners) and ``max.connections.per.ip``, with
  ``max.connections.per.ip.overrides`` (``host:count,host:count``): a connection past
  a limit is closed as soon as it is accepted, and logged at most once a second;
- ``connections.max.idle.ms`` (10 minutes): a connection that sent no request for that
  long is closed, authenticated or not, so idle sockets cannot pile up;
- ``max.connection.creation.rate`` (broker-wide, and per listener as
  ``listener.name.<l>.max.connection.creation.rate``): past the rate, the listener
  waits before it accepts the next connection (nothing is refused), as Kafka's
  ``Acceptor`` blocks in ``ConnectionQuotas.inc``.

Pure bookkeeping; the broker accepts, closes and times.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from oncelog.broker.config import BrokerConfig, BrokerConfigError

UNLIMITED = 2**31 - 1


def parse_overrides(value: str) -> dict[str, int]:
    """``host:count,host:count`` as Kafka writes ``max.connections.per.ip.overrides``."""
    out: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise BrokerConfigError(
                f"Invalid max.connections.per.ip.overrides entry {entry!r}: expected host:count"
            )
        out[host] = int(count)
    return out


@dataclass
class ConnectionQuotas:
    max_connections: int = UNLIMITED
    per_ip: int = UNLIMITED
    overrides: dict[str, int] = field(default_factory=dict)
    per_host: Counter[str] = field(default_factory=Counter)
    total: int = 0

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; why it is refused (None: admitted)."""
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        limit = self.overrides.get(host, self.per_ip)
        if self.per_host[host] >= limit:
            return f"max.connections.per.ip ({limit}) reached for {host}"
        self.per_host[host] += 1
        self.total += 1
        return None

    def release(self, host: str) -> None:
        self.per_host[host] -= 1
        if self.per_host[host] <= 0:
            del self.per_host[host]
        self.total -= 1


def idle(last_active: dict[int, float], now: float, idle_s: float) -> list[int]:
    """The connections with no request for longer than ``idle_s``."""
    return [cid for cid, at in last_active.items() if now - at > idle_s]


@dataclass
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0


class CreationRate:
    """One connection-creation-rate sensor with its upper-bound quota: Kafka's ``Sensor``
    with a ``Rate`` over a ``WindowedSum`` (``quota.window.num`` samples of
    ``quota.window.size.seconds``) and a ``Quota``, ported rule for rule so the same
    settings admit the same bursts. In particular a fresh sensor measures over
    ``samples - 1`` whole windows (``Rate.windowSize``): with Kafka's defaults (11 x 1 s)
    a burst of 10 s worth of connections passes before the first one waits."""

    def __init__(self, limit: int, samples: int = 11, window_ms: int = 1000) -> None:
        self.limit = limit
        self.samples = samples
        self.window_ms = window_ms
        self._stat: list[_Sample] = []  # up to samples + 1, used round robin
        self._current = 0

    def record(self, now_ms: int) -> int:
        """Count one connection at ``now_ms``; how long (ms) to wait before accepting it:
        the delay that brings the measured rate back to the limit (``QuotaUtils.
        throttleTime``), at most one window (``ConnectionQuotas.maxThrottleTimeMs``)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:  # SampledStat.record
            sample = self._advance(now_ms)
        sample.value += 1
        sample.last_ms = now_ms
        window = self.window_size(now_ms)  # Sensor.checkQuotas: Rate.measure
        rate = sum(s.value for s in self._stat) / (window / 1000)
        if rate <= self.limit:  # Quota.acceptable (an upper bound)
            return 0
        if self.limit <= 0:
            return self.window_ms
        throttle = math.floor((rate - self.limit) / self.limit * window + 0.5)  # Math.round
        return min(throttle, self.window_ms)

    def rate(self, now_ms: int) -> float:
        """Connections per second as Kafka's ``connection-creation-rate`` metric reads."""
        window = self.window_size(now_ms)
        return sum(s.value for s in self._stat) / (window / 1000)

    def window_size(self, now_ms: int) -> int:
        """``Rate.windowSize``: the time since the oldest live sample, but at least
        ``samples - 1`` whole windows (a young sensor must not measure a huge rate)."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._stat:
            self._stat.append(_Sample(now_ms, now_ms))
        return self._stat[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One more sample than configured: the one overlapping the window's start.
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._stat):
            self._stat.append(_Sample(now_ms, now_ms))
        else:
            self._stat[self._current].reset(now_ms)
        return self._stat[self._current]

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._stat:
            self._stat.append(_Sample(now_ms, now_ms))
        return min(self._stat, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        """``SampledStat.purgeObsoleteSamples``: samples with no event in the whole
        monitored span start afresh."""
        expire_age = self.samples * self.window_ms
        for s in self._stat:
            if now_ms - s.last_ms >= expire_age:
                s.reset(now_ms)


class CreationRates:
    """The broker-wide and per-listener ``max.connection.creation.rate`` sensors."""

    def __init__(
        self,
        broker_limit: int,
        listener_limits: dict[str, int],
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        def sensor(limit: int) -> CreationRate | None:
            # Unlimited: Kafka's sensor never throttles, so none is kept.
            return None if limit >= UNLIMITED else CreationRate(limit, samples, window_ms)

        self._broker = sensor(broker_limit)
        self._listeners = {name: sensor(limit) for name, limit in listener_limits.items()}

    def limits(self, listener: str) -> bool:
        """Whether connections on ``listener`` are rate-limited at all."""
        return self._broker is not None or self._listeners.get(listener) is not None

    def record(self, listener: str, now_ms: int) -> int:
        """One new connection on ``listener``; the delay (ms) before it is accepted: the
        longer of the broker-wide and the listener's (``ConnectionQuotas.
        recordConnectionAndGetThrottleTimeMs``; both sensors count it either way)."""
        broker = self._broker.record(now_ms) if self._broker is not None else 0
        own = self._listeners.get(listener)
        return max(broker, own.record(now_ms) if own is not None else 0)

    @classmethod
    def from_config(cls, config: BrokerConfig, listeners: Iterable[str]) -> CreationRates:
        """Each listener's limit is ``listener.name.<l>.max.connection.creation.rate``,
        else the broker-wide value (Kafka configures ``ListenerConnectionQuota`` from
        the listener-prefixed settings over the unprefixed ones)."""
        key = "max.connection.creation.rate"
        limits: dict[str, int] = {}
        for name in listeners:
            value = config.for_listener(name, key).strip()
            if not value.lstrip("-").isdigit() or int(value) < 0:
                raise BrokerConfigError(
                    f"Invalid value {value} for configuration "
                    f"listener.name.{name.lower()}.{key}: Value must be at least 0"
                )
            limits[name] = int(value)
        return cls(
            config.settings.max_connection_creation_rate,
            limits,
            samples=config.settings.quota_window_num,
            window_ms=config.settings.quota_window_size_seconds * 1000,
        )
