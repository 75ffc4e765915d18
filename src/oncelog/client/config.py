"""How a client reaches the cluster: bootstrap servers plus librdkafka-style connection
settings, shared by confluent-kafka's clients and the protocol client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oncelog.client.security import SecurityConfig

_CONNECTION_PREFIXES = (
    "security.",
    "sasl.",
    "ssl.",
    "socket.",
    "client.",
    "broker.",
    "api.version",
    "reconnect.",
    "metadata.",
    "enable.ssl",
    "enable.sasl",
)


def connection_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The subset of librdkafka settings about reaching the cluster (security, sockets), for
    the auxiliary clients (admin, decision store) that share a producer's or consumer's conf."""
    return {k: v for k, v in conf.items() if k.startswith(_CONNECTION_PREFIXES)}


@dataclass(frozen=True)
class ClientConfig:
    bootstrap: str
    conf: Mapping[str, str] = field(default_factory=dict)  # librdkafka names

    @classmethod
    def of(cls, bootstrap: str, conf: Mapping[str, str] | None = None) -> ClientConfig:
        """Keep only the connection settings of a producer's or consumer's conf; checks
        the security settings at once (an unknown security.protocol fails here)."""
        cfg = cls(bootstrap, connection_conf(conf or {}))
        cfg.security  # noqa: B018 - validation
        return cfg

    @property
    def security(self) -> SecurityConfig:
        return SecurityConfig.from_conf(self.conf)

    def servers(self) -> list[str]:
        return [s.strip() for s in self.bootstrap.split(",") if s.strip()]

    def librdkafka(self, **settings: Any) -> dict[str, Any]:
        """A confluent-kafka configuration: these settings over the connection settings."""
        return {**self.conf, **settings, "bootstrap.servers": self.bootstrap}
