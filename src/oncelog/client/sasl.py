"""SASL authentication of the protocol client (KIP-43 / KIP-152): SaslHandshake, then
SaslAuthenticate round trips carrying the mechanism's messages.

The mechanisms are sans-IO: ``first()`` gives the client's first message, ``step(reply)``
the next one (None when the exchange is complete). SCRAM is scramp's client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import request as sa
from kio.schema.sasl_handshake.v1 import request as sh

from oncelog.client.errors import AuthenticationError
from oncelog.client.security import ClientConfigError, SecurityConfig


class Mechanism(Protocol):
    name: str

    def first(self) -> bytes: ...

    def step(self, challenge: bytes) -> bytes | None: ...


class Plain:
    """RFC 4616: one message, authzid empty."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        return None


class Scram:
    """RFC 5802 / 7677 (SCRAM-SHA-256, SCRAM-SHA-512), no channel binding, as Kafka does."""

    def __init__(
        self, name: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        from scramp import ScramClient

        self.name = name
        self._client = ScramClient([name], username, password, c_nonce=nonce)
        self._sent_final = False

    def first(self) -> bytes:
        return self._client.get_client_first().encode()

    def step(self, challenge: bytes) -> bytes | None:
        from scramp import ScramException

        try:
            if not self._sent_final:
                self._client.set_server_first(challenge.decode())
                self._sent_final = True
                return self._client.get_client_final().encode()
            self._client.set_server_final(challenge.decode())
        except ScramException as exc:
            raise AuthenticationError(f"{self.name}: {exc}") from exc
        return None


def mechanism_for(security: SecurityConfig) -> Mechanism:
    name, user, password = security.sasl_mechanism, security.sasl_username, security.sasl_password
    if user is None or password is None:
        raise ClientConfigError("SASL needs sasl.username and sasl.password")
    if name == "PLAIN":
        return Plain(user, password)
    if name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return Scram(name, user, password)
    raise ClientConfigError(f"unsupported sasl.mechanism {name!r}")


def handshake_request(mechanism: str) -> sh.SaslHandshakeRequest:
    return sh.SaslHandshakeRequest(mechanism=mechanism)


def authenticate_request(auth_bytes: bytes) -> sa.SaslAuthenticateRequest:
    return sa.SaslAuthenticateRequest(auth_bytes=auth_bytes)


def authenticate(request: Callable[[Any], Any], mechanism: Mechanism) -> None:
    """Run the exchange over ``request`` (send a kio request, return its response)."""
    hs = request(handshake_request(mechanism.name))
    if hs.error_code != ErrorCode.none:
        raise AuthenticationError(
            f"SASL mechanism {mechanism.name} refused ({hs.error_code.name.upper()}); the broker offers {', '.join(hs.mechanisms) or 'none'}",
            hs.error_code,
        )
    message: bytes | None = mechanism.first()
    while message is not None:
        resp = request(authenticate_request(message))
        if resp.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"SASL {mechanism.name} authentication failed: {resp.error_code.name.upper()} ({resp.error_message or 'no message'})",
                resp.error_code,
            )
        message = mechanism.step(resp.auth_bytes)
