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
from typing import TYPE_CHECKING

from oncelog.broker.apis.api_versions import unsupported_version_response
from oncelog.broker.listeners import Listener
from oncelog.broker.request import NO_RESPONSE, CloseConnection, RequestContext
from oncelog.broker.session import Session
from oncelog.broker.tls import peer_dn
from oncelog.clock import now_ms
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.framing import Frame, FrameError
from oncelog.protocol.messages import (
    RequestParseError,
    decode_request,
    encode_response,
    peek_header,
)

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)

_conn_ids = itertools.count(1)

# What a SASL listener serves before authentication (and after KIP-368 expiry).
_AUTHENTICATION_APIS = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)


class Connection:
    """One client connection: frames in, one request at a time, responses out."""

    def __init__(self, broker: Broker, protocol: FrameProtocol, listener: Listener) -> None:
        self.broker = broker
        self.protocol = protocol
        self.id = next(_conn_ids)
        assert protocol.transport is not None
        peer = protocol.transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.session = Session(
            listener=listener.name,
            protocol=listener.protocol,
            client_host=peer[0] if isinstance(peer, tuple) else str(peer),
            authenticated=not listener.protocol.uses_sasl,
        )
        self._full_frame_size = protocol.parser.max_size
        if listener.protocol.uses_tls:
            dn = peer_dn(protocol.transport.get_extra_info("ssl_object"))
            if dn is not None:
                self.session.principal = broker.principal_from_dn(listener.name, dn)
        if listener.protocol.uses_sasl:
            # Until authenticated, frames are capped by sasl.server.max.receive.size.
            protocol.parser.max_size = broker.authentication.max_receive_size(listener.name)

    async def serve(self) -> None:
        try:
            while True:
                frame = await self.protocol.next_frame()
                if frame is None:
                    break
                # The next frame is read only after this response is written: in order.
                out = await self.dispatch(frame)
                if out is not None:
                    self.protocol.write(out)
                    await self.protocol.drain()
                if self.session.close_after_response is not None:
                    # Kafka's connection.failed.authentication.delay.ms: the client reads
                    # the error before the close, and retry storms are slowed down.
                    await asyncio.sleep(self.broker.failed_authentication_delay_s)
                    break
                if self.session.authenticated:
                    self.protocol.parser.max_size = self._full_frame_size
        except CloseConnection as exc:
            log.info("closing connection %s from %s: %s", self.id, self.peer, exc)
        except FrameError as exc:
            log.warning("closing connection %s from %s: %s", self.id, self.peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.broker.on_connection_closed(self.id)
            self.protocol.close()

    async def dispatch(self, frame: Frame) -> bytes | None:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except RequestParseError as exc:
            raise CloseConnection(str(exc)) from exc
        spec = self.broker.apis.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if not spec.supports(version):
            if api_key == ApiKey.API_VERSIONS:
                return unsupported_version_response(self.broker.apis, correlation_id)
            raise CloseConnection(f"unsupported version {version} of API {spec.key.name}")
        session = self.session
        if api_key not in _AUTHENTICATION_APIS:
            if not session.authenticated:
                raise CloseConnection(f"{spec.key.name} request before SASL authentication")
            if session.expires_at_ms is not None and session.expired(now_ms()):
                raise CloseConnection("SASL session expired without re-authentication (KIP-368)")
        try:
            header, request = decode_request(frame, api_key, version)
        except RequestParseError as exc:
            raise CloseConnection(f"INVALID_REQUEST: {exc}") from exc
        ctx = RequestContext(self.broker, header, self.id, self.peer, session)
        try:
            result = None
            if spec.authorize is not None and self.broker.authorizer.enabled:
                result = spec.authorize(ctx, request)  # a denial answers in the handler's place
            if result is None:
                result = spec.handler(ctx, request)
            if inspect.isawaitable(result):
                result = await result
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for %s v%d failed", spec.key.name, version)
            raise CloseConnection(f"internal error: {exc!r}") from exc
        if result is NO_RESPONSE:
            return None
        return encode_response(api_key, version, correlation_id, result)
