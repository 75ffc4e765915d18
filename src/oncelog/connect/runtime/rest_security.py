"""The REST API's own security, as Kafka Connect configures it: TLS on ``https://``
listeners and for the requests a worker sends other workers (``SSLUtils``), and HTTP
basic authentication against a credentials file (``BasicAuthSecurityRestExtension``
with its ``PropertyFileLoginModule``).

TLS settings come from the ``listeners.https.``-prefixed keys when any is set, else
from the worker's ``ssl.*`` keys: Kafka's ``valuesWithPrefixAllOrNothing``, so a prefix
never mixes with unprefixed values.
"""

from __future__ import annotations

import base64
import hmac
import logging
import os
import ssl
import stat
from dataclasses import dataclass
from urllib.parse import urlsplit

import javaproperties

from oncelog.connect.api.errors import ConfigException
from oncelog.connect.runtime.worker_config import (
    REST_BASIC_AUTH_CREDENTIALS_FILE,
    WorkerConfig,
)
from oncelog.security.http_basic import basic_credentials
from oncelog.security.tls import TlsConfigError, client_context, server_context

log = logging.getLogger(__name__)

HTTPS_PREFIX = "listeners.https."


def rest_ssl_settings(config: WorkerConfig) -> dict[str, str]:
    originals = {k: str(v) for k, v in config.originals.items() if v is not None}
    prefixed = {
        k[len(HTTPS_PREFIX) :]: v for k, v in originals.items() if k.startswith(HTTPS_PREFIX)
    }
    if prefixed:
        return prefixed
    return {k: v for k, v in originals.items() if k.startswith("ssl.")}


class BasicAuthenticator:
    """Users and passwords from a Java properties file (``user=password`` per line), as
    Kafka's ``PropertyFileLoginModule`` reads them. Unlike Kafka, an empty file is
    refused at start rather than letting every request in."""

    def __init__(self, users: dict[str, str]) -> None:
        if not users:
            raise ConfigException(
                REST_BASIC_AUTH_CREDENTIALS_FILE,
                "(empty)",
                "The credentials file lists no user: every request would be refused. "
                "Add user=password lines",
            )
        self._users = {u: p.encode() for u, p in users.items()}

    @classmethod
    def from_file(cls, path: str) -> BasicAuthenticator:
        try:
            with open(path, encoding="utf-8") as fh:
                users = dict(javaproperties.load(fh))
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise ConfigException(
                REST_BASIC_AUTH_CREDENTIALS_FILE, path, f"Cannot read the credentials file: {exc}"
            ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning(
                "the REST credentials file %s is readable by other users (mode %o): chmod 600 it",
                path,
                stat.S_IMODE(mode),
            )
        return cls(users)

    def authenticate(self, authorization: str | None) -> str | None:
        """The user an ``Authorization: Basic …`` header proves, or None."""
        credentials = basic_credentials(authorization)
        if credentials is None or not credentials[0]:
            return None
        user, password = credentials
        expected = self._users.get(user)
        # Compared in constant time, and against a dummy for unknown users, so that
        # timing tells an attacker neither the password nor which users exist.
        ok = hmac.compare_digest(password.encode(), expected if expected is not None else b"\0")
        return user if ok and expected is not None else None


def basic_auth_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass(frozen=True)
class RestSecurity:
    """What the REST server and the worker's REST client need: the server's TLS context
    (None on an http listener), the client's (for https peers), and the authenticator
    (None: no authentication)."""

    server_ssl: ssl.SSLContext | None
    client_ssl: ssl.SSLContext | None
    authenticator: BasicAuthenticator | None

    @property
    def scheme(self) -> str:
        return "https" if self.server_ssl is not None else "http"


def rest_security(config: WorkerConfig, *, distributed: bool) -> RestSecurity:
    listener = config.listener_urls()[0]
    https = urlsplit(listener).scheme.lower() == "https"
    settings = rest_ssl_settings(config)
    key = (
        HTTPS_PREFIX + "ssl.*"
        if any(k.startswith(HTTPS_PREFIX) for k in config.originals)
        else "ssl.*"
    )
    try:
        server = server_context(settings) if https else None
        client = client_context(settings)
    except TlsConfigError as exc:
        raise ConfigException(key, listener, f"REST listener {listener}: {exc}") from None
    credentials = config.settings.rest_basic_auth_credentials_file
    authenticator = BasicAuthenticator.from_file(str(credentials)) if credentials else None
    if (
        distributed
        and authenticator is not None
        and config.settings.connect_protocol.lower() != "sessioned"
    ):
        log.warning(
            "REST basic authentication does not cover the internal endpoints "
            "(PUT /connectors/{c}/tasks and /fence), as in Kafka; with connect.protocol=%s "
            "they are not signed either, so anyone who reaches the REST port can call them. "
            "Use connect.protocol=sessioned",
            config.settings.connect_protocol,
        )
    return RestSecurity(server, client, authenticator)
