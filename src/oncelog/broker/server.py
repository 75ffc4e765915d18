"""asyncio TCP front end: frames in, dispatch, responses out in request order.

Like Kafka, each connection processes one request at a time (Kafka mutes the
channel until the response is sent), so responses are naturally ordered while
clients still pipeline requests through the socket buffer.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.framing import FrameError, FrameProtocol
from oncelog.protocol.messages import (
    RequestHeader,
    RequestParseError,
    decode_request,
    encode_response,
    make,
    peek_header,
    response_module,
)

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)

_conn_ids = itertools.count(1)


class NoResponse:
    """Returned by a handler when Kafka sends nothing back (acks=0 produce)."""


NO_RESPONSE = NoResponse()


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    connection_id: int
    peer: str

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response(self) -> Any:
        """The kio module holding this request's response classes."""
        return response_module(self.header.api_key, self.header.api_version)


Handler = Callable[[RequestContext, Any], Any | Awaitable[Any]]


class CloseConnection(Exception):
    pass


class Connection:
    """One client connection: frames in, one request at a time, responses out."""

    def __init__(self, broker: Broker, protocol: FrameProtocol) -> None:
        self.broker = broker
        self.protocol = protocol
        self.id = next(_conn_ids)
        assert protocol.transport is not None
        peer = protocol.transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def serve(self) -> None:
        try:
            while True:
                frame = await self.protocol.next_frame()
                if frame is None:
                    break
                out = await self.dispatch(frame)
                if out is not None:
                    self.protocol.write(out)
                    await self.protocol.drain()
        except (FrameError, CloseConnection) as exc:
            log.warning("closing connection %s from %s: %s", self.id, self.peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.broker.on_connection_closed(self.id)
            self.protocol.close()

    async def dispatch(self, frame: bytes | bytearray) -> bytes | None:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except RequestParseError as exc:
            raise CloseConnection(str(exc)) from exc
        spec = self.broker.apis.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key}")
        lo, hi, handler = spec
        if not lo <= version <= hi:
            if api_key == ApiKey.API_VERSIONS:
                return self._unsupported_api_versions(correlation_id)
            raise CloseConnection(f"unsupported version {version} of API {ApiKey(api_key).name}")
        try:
            header, request = decode_request(frame, api_key, version)
        except RequestParseError as exc:
            raise CloseConnection(f"INVALID_REQUEST: {exc}") from exc
        ctx = RequestContext(self.broker, header, self.id, self.peer)
        try:
            result = handler(ctx, request)
            if inspect.isawaitable(result):
                result = await result
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for %s v%d failed", ApiKey(api_key).name, version)
            raise CloseConnection(f"internal error: {exc!r}") from exc
        if result is NO_RESPONSE:
            return None
        return encode_response(api_key, version, correlation_id, result)

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        # Kafka answers an unknown ApiVersions version with a v0 response so the
        # client can retry with a version from the list.
        mod = response_module(ApiKey.API_VERSIONS, 0)
        resp = make(
            mod.ApiVersionsResponse,
            error_code=ErrorCode.unsupported_version,
            api_keys=self.broker.api_version_entries(mod),
        )
        return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, resp)
