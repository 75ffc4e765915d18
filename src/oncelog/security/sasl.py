"""Server side of the SASL mechanisms the broker offers: PLAIN and SCRAM-SHA-*.

Each authenticator consumes client tokens and answers a challenge; when the
exchange is complete, ``principal`` is set. Any failure raises
``SaslAuthenticationError`` (Kafka's SASL_AUTHENTICATION_FAILED).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from oncelog.security.principal import user
from oncelog.security.scram import ScramCredential, ScramMechanism

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslAuthenticationError(Exception):
    pass


class Authenticator(Protocol):
    mechanism: str
    principal: str | None

    def step(self, token: bytes) -> bytes: ...


_JAAS_USER = re.compile(r'user_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def plain_users_from_jaas(jaas: str) -> dict[str, str]:
    """``...PlainLoginModule required user_alice="secret" ...;`` -> {alice: secret}."""
    return {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_USER.finditer(jaas)}


class PlainAuthenticator:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.principal: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response")
        authzid, username, password = (p.decode("utf-8", "replace") for p in parts)
        expected = self.users.get(username)
        # compare_digest against a dummy too, so unknown users take the same time
        if (
            not hmac.compare_digest((expected or "\0x").encode(), password.encode())
            or expected is None
        ):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: authorization id differs from user"
            )
        self.principal = user(username)
        return b""


def scramp() -> ModuleType:
    """The scramp library, imported by the first SCRAM exchange or by a broker whose
    listeners offer SCRAM (``Broker``), not by every start (~25 ms with asn1crypto)."""
    import scramp as library

    return library


class ScramAuthenticator:
    def __init__(
        self, mechanism: str, lookup: Callable[[str, ScramMechanism], ScramCredential | None]
    ) -> None:
        self.mechanism = mechanism
        self.principal: str | None = None
        self._mech = ScramMechanism.from_sasl_name(mechanism)
        self._lookup = lookup
        self._username: str | None = None
        self._server = scramp().ScramMechanism(mechanism).make_server(self._auth_info)
        self._round = 0
        self._unknown_user = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._lookup(username, self._mech)
        if credential is None:
            self._unknown_user = True
            raise scramp().ScramException("unknown user")
        self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def step(self, token: bytes) -> bytes:
        self._round += 1
        try:
            if self._round == 1:
                self._server.set_client_first(token.decode("utf-8"))
                return self._server.get_server_first().encode()
            if self._round == 2:
                self._server.set_client_final(token.decode("utf-8"))
                final = self._server.get_server_final().encode()
                assert self._username is not None
                self.principal = user(self._username)
                return final
        except (scramp().ScramException, UnicodeDecodeError, ValueError) as exc:
            reason = "Invalid user credentials" if self._unknown_user else str(exc)
            raise SaslAuthenticationError(f"Authentication failed: {reason}") from exc
        raise SaslAuthenticationError("unexpected SCRAM message after the exchange ended")


def login_with_password(authenticator: Authenticator, username: str, password: str) -> str:
    """Play the client's side of ``authenticator``'s whole exchange in process and return
    the principal it grants: a user name and password from elsewhere (HTTP basic
    authentication) checked by exactly the code that checks a Kafka client's SASL login.
    Raises ``SaslAuthenticationError`` as that login would fail."""
    if authenticator.mechanism == "PLAIN":
        authenticator.step(b"\0".join((b"", username.encode(), password.encode())))
    else:
        library = scramp()
        try:
            client = library.ScramClient([authenticator.mechanism], username, password)
            first = authenticator.step(client.get_client_first().encode())
            client.set_server_first(first.decode())
            authenticator.step(client.get_client_final().encode())
        except library.ScramException as exc:  # e.g. a user name SCRAM cannot carry
            raise SaslAuthenticationError(f"Authentication failed: {exc}") from exc
    if authenticator.principal is None:
        raise SaslAuthenticationError("Authentication failed: the exchange did not complete")
    return authenticator.principal
