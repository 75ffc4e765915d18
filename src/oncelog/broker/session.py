"""Per-connection security state: listener, principal, SASL progress."""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.broker.listeners import SecurityProtocol
from oncelog.security.principal import ANONYMOUS
from oncelog.security.sasl import Authenticator


@dataclass(slots=True)
class Session:
    listener: str = "PLAINTEXT"
    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    client_host: str = "127.0.0.1"
    principal: str = ANONYMOUS
    # False on a SASL listener until SaslAuthenticate succeeds.
    authenticated: bool = True
    # Set by SaslHandshake, consumed by SaslAuthenticate.
    authenticator: Authenticator | None = None
    # The SASL mechanism the connection authenticated with: re-authentication must use it.
    mechanism: str | None = None
    # KIP-368: after this (broker clock, ms) only re-authentication is served.
    expires_at_ms: int | None = None
    # Set by a handler whose response must be the last one (failed authentication).
    close_after_response: str | None = None

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms
