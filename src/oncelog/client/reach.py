"""Check, before building clients, that a cluster answers with the given security settings.

librdkafka retries a refused TLS or SASL handshake silently until its request times out and
then reports only "Broker transport failure". A command or a Connect worker calls
:func:`check_cluster` first: a refused connection is retried until the deadline (as clients
do, a broker may be starting), then one line names the address and the reason; a refused
handshake fails at once with Kafka's error code (SASL_AUTHENTICATION_FAILED,
UNSUPPORTED_SASL_MECHANISM) or the TLS verification error; a connection the broker closes
during the handshake names ``security.protocol`` as the likely mistake.
"""

from __future__ import annotations

import os
import socket
import ssl
import time

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md

from oncelog.client.config import ClientConfig
from oncelog.client.errors import AuthenticationError, ClientError
from oncelog.client.wire import WireClient


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def _split(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)


def check_reachable(config: ClientConfig, timeout_s: float) -> str:
    """The first bootstrap server that accepts a TCP connection within ``timeout_s`` seconds
    (refused connections are retried until then); else ClientError(NETWORK_EXCEPTION)
    ``cannot reach HOST:PORT (connection refused) after 5 s``."""
    servers = config.servers()
    deadline = time.monotonic() + timeout_s
    reasons: dict[str, str] = {}
    while True:
        for server in servers:
            left = max(0.05, deadline - time.monotonic())
            try:
                socket.create_connection(_split(server), timeout=min(left, 2.0)).close()
                return server
            except OSError as exc:
                reasons[server] = _reason(exc) or "unreachable"
        if time.monotonic() >= deadline:
            break
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
    what = ", ".join(f"{a} ({r})" for a, r in reasons.items())
    raise ClientError(f"cannot reach {what} after {timeout_s:g} s", ErrorCode.network_exception)


def check_handshake(config: ClientConfig, server: str, timeout_s: float = 10.0) -> None:
    """Connect to ``server`` as ``config`` says (TLS, SASL) and send one Metadata request
    (no topics): AuthenticationError / ClientError naming the cause when that fails."""
    security = config.security
    mismatch = f"is it a Kafka listener, and does security.protocol={security.protocol} match it?"
    try:
        with WireClient(
            server, timeout=timeout_s, client_id="oncelog-check", security=security
        ) as conn:
            conn.request(
                md.MetadataRequest(
                    topics=(),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
    except AuthenticationError:
        raise
    except ssl.SSLError as exc:
        if isinstance(exc, ssl.SSLEOFError) or exc.reason == "UNEXPECTED_EOF_WHILE_READING":
            # a plaintext listener, or a broker going away: not an authentication failure
            raise ClientError(
                f"TLS handshake with {server} failed: the broker closed the connection; {mismatch}",
                ErrorCode.network_exception,
                retriable=False,
            ) from exc
        raise AuthenticationError(
            f"TLS handshake with {server} failed: {exc.reason or exc}; {mismatch}"
        ) from exc
    except TimeoutError as exc:
        raise ClientError(
            f"{server} accepted the connection but did not answer within {timeout_s:g} s; {mismatch}",
            ErrorCode.request_timed_out,
        ) from exc
    except ConnectionError as exc:  # closed or reset during the handshake or the first request
        raise ClientError(
            f"{server} closed the connection; {mismatch}",
            ErrorCode.network_exception,
            retriable=False,
        ) from exc
    except OSError as exc:
        raise ClientError(
            f"connecting to {server} failed ({_reason(exc)}); {mismatch}",
            ErrorCode.network_exception,
            retriable=False,
        ) from exc


def check_cluster(config: ClientConfig, timeout_s: float) -> None:
    """:func:`check_reachable` then :func:`check_handshake` on the server that answered."""
    server = check_reachable(config, timeout_s)
    check_handshake(config, server)
