"""How many connections the broker accepts, and when it closes idle ones, with Kafka's
settings and defaults (Kafka's ``SocketServer.ConnectionQuotas`` and the idle expiry
of its ``Selector``):

- ``max.connections`` (all listeners) and ``max.connections.per.ip``, with
  ``max.connections.per.ip.overrides`` (``host:count,host:count``): a connection past
  a limit is closed as soon as it is accepted, and logged at most once a second;
- ``connections.max.idle.ms`` (10 minutes): a connection that sent no request for that
  long is closed, authenticated or not, so idle sockets cannot pile up.

Pure bookkeeping; the broker accepts, closes and times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from oncelog.broker.config import BrokerConfigError

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
