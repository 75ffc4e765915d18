"""Which SASL mechanisms a listener offers and who may log in with them.

PLAIN users come from the listener's JAAS text (Kafka's
``listener.name.<l>.plain.sasl.jaas.config``); SCRAM credentials from the
durable credential store, managed with AlterUserScramCredentials.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.clock import now_ms
from oncelog.security.credential_store import ScramCredentialStore
from oncelog.security.sasl import (
    MECHANISMS,
    Authenticator,
    PlainAuthenticator,
    SaslAuthenticationError,
    ScramAuthenticator,
    login_with_password,
    plain_users_from_jaas,
)


class Authentication:
    def __init__(
        self,
        config: BrokerConfig,
        credentials: ScramCredentialStore,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.credentials = credentials
        self.clock = clock
        self._plain_users: dict[str, dict[str, str]] = {}

    def enabled_mechanisms(self, listener: str) -> list[str]:
        value = self.config.for_listener(listener, "sasl.enabled.mechanisms")
        mechanisms = [m.strip().upper() for m in value.split(",") if m.strip()]
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown:
            raise BrokerConfigError(f"listener {listener}: unsupported SASL mechanisms {unknown}")
        return mechanisms

    def reauth_ms(self, listener: str) -> int:
        value = self.config.for_listener(listener, "connections.max.reauth.ms")
        return int(value or 0)

    def session_expiry(self, listener: str) -> tuple[int, int | None]:
        """(session lifetime ms for SaslAuthenticate v1+, expiry instant or None)."""
        lifetime = self.reauth_ms(listener)
        if lifetime <= 0:
            return 0, None
        return lifetime, self.clock() + lifetime

    def max_receive_size(self, listener: str) -> int:
        return int(self.config.for_listener(listener, "sasl.server.max.receive.size"))

    def plain_users(self, listener: str) -> dict[str, str]:
        if listener not in self._plain_users:
            self._plain_users[listener] = plain_users_from_jaas(
                self.config.jaas_config(listener, "PLAIN")
            )
        return self._plain_users[listener]

    def authenticator(self, listener: str, mechanism: str) -> Authenticator | None:
        """A fresh authenticator, or None when the listener does not offer ``mechanism``."""
        if mechanism not in self.enabled_mechanisms(listener):
            return None
        if mechanism == "PLAIN":
            return PlainAuthenticator(self.plain_users(listener))
        return ScramAuthenticator(mechanism, self.credentials.get)

    def password_mechanisms(self, listeners: Iterable[str]) -> list[tuple[str, str]]:
        """(listener, mechanism) pairs a user name and password can log in with on
        ``listeners`` (SASL ones): PLAIN once per listener (its users are its own), each
        SCRAM mechanism once (its credentials are broker-wide)."""
        out: list[tuple[str, str]] = []
        seen_scram: set[str] = set()
        for listener in listeners:
            for mechanism in self.enabled_mechanisms(listener):
                if mechanism == "PLAIN":
                    out.append((listener, mechanism))
                elif mechanism not in seen_scram:
                    seen_scram.add(mechanism)
                    out.append((listener, mechanism))
        return out

    def check_password(
        self, mechanisms: Iterable[tuple[str, str]], username: str, password: str
    ) -> str:
        """The principal a Kafka client logging in as ``username`` with ``password``
        would get through one of ``mechanisms`` (from ``password_mechanisms``), checked
        by the same authenticators SaslAuthenticate runs (secrets compared in constant
        time there); ``SaslAuthenticationError`` when none accepts them."""
        for listener, mechanism in mechanisms:
            authenticator = self.authenticator(listener, mechanism)
            if authenticator is None:
                continue
            try:
                return login_with_password(authenticator, username, password)
            except SaslAuthenticationError:
                continue
        raise SaslAuthenticationError("Authentication failed: Invalid username or password")
