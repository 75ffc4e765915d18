"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``, parsed into one record per listener.

A listener has a name (``PLAINTEXT``, ``CLIENT``, ...) and is bound to a
security protocol through the map; when the map does not name it, the name must
itself be a protocol, as in Kafka.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import StrEnum

from oncelog.broker.config import BrokerConfig, BrokerConfigError, parse_host_port


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised_host: str
    advertised_port: int | None  # None: advertise the bound port

    def describe(self, bound_port: int) -> str:
        """How the ready line names it: ``127.0.0.1:9093 (SASL_SSL)``; ``*:9092`` for
        every interface."""
        label = self.name if self.name == self.protocol else f"{self.name}/{self.protocol}"
        return f"{self.host or '*'}:{bound_port} ({label})"


def _split_entries(value: str, bare_name: str | None = None) -> list[tuple[str, str]]:
    """``NAME://HOST:PORT,...`` -> [(NAME, HOST:PORT)]; a bare ``HOST:PORT`` is taken
    as ``bare_name``'s when one is given (oncelog's older advertised.listeners form)."""
    out = []
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if bare_name is not None and "://" not in entry:
            out.append((bare_name, entry))
            continue
        name, sep, address = entry.partition("://")
        if not sep or not name:
            raise BrokerConfigError(f"listener {entry!r} is not NAME://HOST:PORT")
        out.append((name.upper(), address))
    return out


def protocol_map(value: str) -> dict[str, SecurityProtocol]:
    out: dict[str, SecurityProtocol] = {}
    for raw in value.split(","):
        if not raw.strip():
            continue
        name, sep, proto = raw.strip().partition(":")
        try:
            out[name.upper()] = SecurityProtocol(proto.upper())
        except ValueError as exc:
            raise BrokerConfigError(
                f"listener.security.protocol.map: {raw.strip()!r} names no security protocol"
            ) from exc
        if not sep:
            raise BrokerConfigError(f"listener.security.protocol.map: bad entry {raw!r}")
    return out


def canonical_host_name() -> str:
    """Kafka's ``InetAddress.getLocalHost.getCanonicalHostName``, or loopback when the
    name does not resolve here (a client could not resolve it either)."""
    name = socket.getfqdn()
    try:
        socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        return "127.0.0.1"
    return name


def parse_listeners(config: BrokerConfig) -> list[Listener]:
    mapping = protocol_map(config.settings.listener_security_protocol_map)
    # A KRaft file's controller listeners (CONTROLLER://:9093) serve the quorum: not here.
    controller = config.controller_listener_names
    entries = [e for e in _split_entries(config.settings.listeners) if e[0] not in controller]
    first = entries[0][0] if entries else None
    advertised = {
        name: parse_host_port(address)
        for name, address in _split_entries(config.settings.advertised_listeners, first)
        if name not in controller
    }
    listeners: list[Listener] = []
    for name, address in entries:
        if any(existing.name == name for existing in listeners):
            raise BrokerConfigError(f"listener {name} is declared twice")
        host, port = parse_host_port(address)
        if name in mapping:
            protocol = mapping[name]
        else:
            try:
                protocol = SecurityProtocol(name)
            except ValueError as exc:
                raise BrokerConfigError(
                    f"listener {name} is not in listener.security.protocol.map"
                ) from exc
        adv_host, adv_port = advertised.get(name, (host, 0))
        if adv_host == "":
            # Kafka advertises an empty host as the machine's canonical host name, so
            # that clients elsewhere can reach a broker that binds every interface.
            adv_host = canonical_host_name()
        elif adv_host in ("0.0.0.0", "::"):
            adv_host = "127.0.0.1"
        listeners.append(
            Listener(name, host, port, protocol, adv_host, adv_port if name in advertised else None)
        )
    unknown = set(advertised) - {listener.name for listener in listeners}
    if unknown:
        raise BrokerConfigError(f"advertised.listeners names unknown listeners {sorted(unknown)}")
    if not listeners:
        raise BrokerConfigError("listeners is empty")
    return listeners
