"""Serving a request here, or forwarding it where it must be served.

A write served on a follower fails with ``NotLeaderError``; the resource forwards the
whole request to the leader, as Kafka does, with the ``forward`` query parameter
bounding the hops to two: a request received without it is forwarded with
``forward=true``, one received with ``forward=true`` is forwarded with
``forward=false``, and one with ``forward=false`` is not forwarded again (409). A task
request on the wrong worker (``NotAssignedError``) is forwarded to the task's owner
once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed.errors import CONFLICT, NotAssignedError, NotLeaderError
from oncelog.connect.distributed.request_signing import ALGORITHM_HEADER, SIGNATURE_HEADER

T = TypeVar("T")
REQUEST_TIMEOUT_S = 90.0
# Kept on a forwarded request: an internal request's signature (the body it signs is
# forwarded as is), and the caller's credentials, which the next worker checks again
# (Kafka's RestClient copies the Authorization header the same way).
_FORWARDED_HEADERS = frozenset(
    {SIGNATURE_HEADER.lower(), ALGORITHM_HEADER.lower(), "authorization"}
)
# The TLS context for requests to other workers (None: the default one).
CLIENT_SSL = web.AppKey("client_ssl", ssl.SSLContext)


async def wait_for(future: concurrent.futures.Future[T]) -> T:
    """The herder's answer within the request timeout (500 after it, as Kafka)."""
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), REQUEST_TIMEOUT_S)
    except TimeoutError:
        raise ConnectRestException(500, "Request timed out") from None


async def serve_or_forward(
    request: web.Request,
    operation: Callable[[], concurrent.futures.Future[T]],
    respond: Callable[[T], web.StreamResponse],
) -> web.StreamResponse:
    """Run ``operation`` here, or forward the request where it must run."""
    try:
        return respond(await wait_for(operation()))
    except NotLeaderError as exc:
        return await forward(request, exc.leader_url)
    except NotAssignedError as exc:
        if exc.owner_url is None or request.query.get("forward") is not None:
            raise ConnectRestException(404, str(exc)) from None
        return await forward(request, exc.owner_url)


async def forward(request: web.Request, base_url: str | None) -> web.Response:
    hop = request.query.get("forward")
    if base_url is None or hop == "false":
        raise ConnectRestException(409, CONFLICT)
    query = dict(request.query)
    query["forward"] = "true" if hop is None else "false"
    url = f"{base_url.rstrip('/')}{request.path}"
    headers = {"Content-Type": "application/json"}
    headers.update({k: v for k, v in request.headers.items() if k.lower() in _FORWARDED_HEADERS})
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                url,
                params=query,
                data=await request.read(),
                headers=headers,
                ssl=request.app.get(CLIENT_SSL, True),
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
            ) as response,
        ):
            body = await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ConnectRestException(
            500, f"Error trying to forward REST request to {base_url}: {exc}"
        ) from None
    if not body:
        return web.Response(status=status)
    return web.Response(status=status, body=body, content_type="application/json")


def json_response(status: int) -> Callable[[Any], web.Response]:
    return lambda body: web.json_response(body, status=status)


def empty_response(status: int) -> Callable[[Any], web.Response]:
    return lambda _: web.Response(status=status)
