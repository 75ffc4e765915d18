"""Requests one worker sends another's internal REST endpoints, signed with the
cluster's session key (``request_signing``) under the ``sessioned`` protocol and
unsigned under the others, which have no session key (as Kafka): task configs to the leader
(``PUT /connectors/{c}/tasks``) and KIP-618 zombie fencing
(``PUT /connectors/{c}/fence``)."""

from __future__ import annotations

import concurrent.futures
import json
import ssl
import threading
import urllib.error
import urllib.request

from oncelog.connect.api.errors import ConnectException, ConnectRestException
from oncelog.connect.distributed import request_signing


def put_signed(
    url: str,
    body: bytes,
    key: bytes | None,
    algorithm: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    timeout_s: float = 90.0,
) -> None:
    """PUT ``body`` to ``url`` signed with ``key`` (None: unsigned), over TLS with
    ``ssl_context`` for an https worker; an error answer raises
    :class:`ConnectRestException` with its status and message, an unreachable worker
    :class:`ConnectException`."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers.update(request_signing.sign(key, body, algorithm))
    request = urllib.request.Request(url, data=body, headers=headers, method="PUT")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=ssl_context) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            message = str(json.loads(text)["message"])
        except (ValueError, KeyError, TypeError):
            message = text.decode("utf-8", "replace")
        raise ConnectRestException(exc.code, message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectException(f"Request to {url} failed: {exc}") from None


def request_fencing(
    leader_url: str | None,
    connector: str,
    key: bytes | None,
    algorithm: str,
    ssl_context: ssl.SSLContext | None = None,
) -> concurrent.futures.Future[None]:
    """Ask the leader for a round of zombie fencing of ``connector`` (KIP-618 startup
    step 2), on a thread of its own; the future fails with the leader's answer."""
    future: concurrent.futures.Future[None] = concurrent.futures.Future()

    def send() -> None:
        try:
            if leader_url is None:
                raise ConnectException("No leader is known to perform zombie fencing")
            put_signed(
                f"{leader_url.rstrip('/')}/connectors/{connector}/fence",
                b"",
                key,
                algorithm,
                ssl_context=ssl_context,
            )
            future.set_result(None)
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=send, name=f"fence-request-{connector}", daemon=True).start()
    return future
