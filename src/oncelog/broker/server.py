"""asyncio TCP front end: frames in, dispatch, responses out in request order.

Like Kafka, each connection processes one request at a time (Kafka mutes the
channel until the response is sent), so responses are naturally ordered while
clients still pipeline requests through the socket buffer. The one exception: a
handler's ``Deferred`` answer (an acks=all produce waiting for its fdatasync) lets the
connection dispatch the next requests meanwhile, up to ``MAX_OWED_RESPONSES``; a writer
task then sends every response in request order.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.api_versions import unsupported_version_response
from oncelog.broker.listeners import Listener
from oncelog.broker.request import NO_RESPONSE, CloseConnection, Deferred, RequestContext
from oncelog.broker.request_stats import response_errors
from oncelog.broker.session import Session
from oncelog.broker.tls import peer_dn
from oncelog.clock import now_ms
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.framing import Frame, FrameError
from oncelog.protocol.messages import (
    InvalidRequestError,
    RequestParseError,
    decode_request,
    encode_response,
    error_response,
    holds_more_entries,
    peek_header,
)
from oncelog.protocol.response_frame import EncodesItself, ResponseFrame

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)
# How long a connection whose authentication failed stays open after its answer.
AUTH_FAILURE_LINGER_S = 0.05
# One DEBUG line per request; off unless switched on (SIGUSR1 toggles it at run time, see
# oncelog.broker.run). Checked with isEnabledFor so the hot path pays nothing when off.
request_log = logging.getLogger("oncelog.broker.requests")

_conn_ids = itertools.count(1)

# An encoded response: bytes, or a frame of bytes and file ranges (Fetch, sent zero-copy).
Response = bytes | ResponseFrame


# Responses a connection may owe while dispatching further requests (librdkafka keeps
# up to 5 produce requests in flight).
MAX_OWED_RESPONSES = 8

# A handler running longer than this without yielding is logged: it stalled every client.
SLOW_HANDLER_S = 0.2

# A response holding more array entries than this is encoded in a worker thread. Encoding
# is pure Python and holds the GIL, but the loop takes it back every switch interval
# (5 ms), so other clients keep being served, as Kafka's network threads do while a
# handler thread works: a DescribeConfigs repeating the broker resource 400 times (52,000
# entries) held the loop for 0.3-0.8 s, and seconds on a loaded machine.
ENCODE_IN_THREAD_ENTRIES = 1000

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
        # Responses owed behind a Deferred one, written in order by ``_writer``.
        self._owed: asyncio.Queue[asyncio.Future[Response | None]] = asyncio.Queue(
            MAX_OWED_RESPONSES
        )
        self._writer: asyncio.Task[None] | None = None
        self._writing = 0  # 1 while the writer awaits or writes the response it took
        self.session = Session(
            listener=listener.name,
            protocol=listener.protocol,
            client_host=peer[0] if isinstance(peer, tuple) else str(peer),
            authenticated=not listener.protocol.uses_sasl,
        )
        self._full_frame_size = protocol.parser.max_size
        # The loop's clock at the last request (connections.max.idle.ms).
        self._clock = asyncio.get_running_loop().time
        self.last_active = self._clock()
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
                if self.protocol.parser.queued:
                    # Fair service: the next request is already here, so it waits its
                    # turn behind fresh requests and other backlogs (see ``turns``).
                    await self.broker.turns.turn()
                frame = await self.protocol.next_frame()
                if frame is None:
                    break
                self.last_active = self._clock()
                out = await self.dispatch(frame)
                failed = self.session.close_after_response is not None
                if failed:
                    # Kafka's connection.failed.authentication.delay.ms: the error answer
                    # itself waits (KafkaChannel.delayCloseOnAuthenticationFailure holds
                    # the send until the delayed close), so a password guesser that hangs
                    # up as soon as it reads the answer is slowed down as much as a
                    # client that waits for the close.
                    await asyncio.sleep(self.broker.failed_authentication_delay_s)
                if isinstance(out, asyncio.Future) or self._owing():
                    await self._owe(out)
                elif out is not None:
                    # The next frame is read only after this response is written: in order.
                    await self.protocol.send(out)
                if failed:
                    await self._flush_owed()  # the error answer goes out before the close
                    # A moment for the client to read it: closing a socket that still
                    # holds unread client bytes sends a reset, which can discard the
                    # answer in the client's buffer before it is read.
                    await asyncio.sleep(
                        min(AUTH_FAILURE_LINGER_S, self.broker.failed_authentication_delay_s)
                    )
                    break
                if self.session.authenticated:
                    self.protocol.parser.max_size = self._full_frame_size
        except CloseConnection as exc:
            self.broker.client_faults.note(
                "connections closed on bad requests", logging.INFO,
                "closing connection %s from %s: %s", self.id, self.peer, exc,
            )  # fmt: skip
        except FrameError as exc:
            self.broker.client_faults.note(
                "connections closed on framing errors", logging.WARNING,
                "closing connection %s from %s: %s", self.id, self.peer, exc,
            )  # fmt: skip
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            # Forgotten as well as cancelled: the cancelled task's traceback holds its
            # frame, which holds this connection (and the answers it was writing), a
            # cycle only a full collection would free.
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.cancel()
            self.broker.on_connection_closed(self.id)
            self.protocol.close()
            self.protocol.release()

    def close_idle(self) -> None:
        """Close an idle connection: its request loop sees the end of the stream."""
        self.protocol.close()

    async def _flush_owed(self, timeout_s: float = 5.0) -> None:
        """Wait (bounded) until the response writer has sent every owed answer."""
        deadline = self._clock() + timeout_s
        while self._owing() and self._writer is not None and not self._writer.done():
            if self._clock() > deadline:
                return
            await asyncio.sleep(0.01)

    def _owing(self) -> bool:
        return self._writer is not None and self._owed.qsize() + self._writing > 0

    async def _owe(self, out: asyncio.Future[Response | None] | Response | None) -> None:
        if not isinstance(out, asyncio.Future):
            done: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
            done.set_result(out)
            out = done
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_in_order())
        elif self._writer.done():
            raise CloseConnection("the connection's response writer stopped")
        await self._owed.put(out)  # full: stop reading until the writer catches up

    async def _write_in_order(self) -> None:
        try:
            while True:
                fut = await self._owed.get()
                self._writing = 1
                out = await fut
                if out is not None:
                    await self.protocol.send(out)
                self._writing = 0
        except (CloseConnection, ConnectionError) as exc:
            self.broker.client_faults.note(
                "connections closed while answers were owed", logging.WARNING,
                "closing connection %s from %s: %s", self.id, self.peer, exc,
            )  # fmt: skip
        except Exception:
            log.exception("response writer of connection %s from %s failed", self.id, self.peer)
        finally:
            self.protocol.close()
            while not self._owed.empty():  # unblock a reader waiting to queue one more
                self._owed.get_nowait()  # a dropped ResponseFrame closes its file ranges

    async def dispatch(self, frame: Frame) -> Response | asyncio.Future[Response | None] | None:
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
        except InvalidRequestError as exc:
            return self._invalid_request(spec.key.name, api_key, version, correlation_id, exc)
        ctx = RequestContext(self.broker, header, self.id, self.peer, session)
        stats = self.broker.stats
        started = time.perf_counter()
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug(
                "%s v%d from %s",
                spec.key.name,
                version,
                self.peer,
                extra={
                    "api": spec.key.name,
                    "api_version": version,
                    "correlation_id": correlation_id,
                    "connection": self.id,
                    "client_id": header.client_id,
                    "principal": session.principal,
                },
            )
        try:
            result = None
            if spec.authorize is not None and self.broker.authorizer.enabled:
                result = spec.authorize(ctx, request)  # a denial answers in the handler's place
            if result is None:
                result = spec.handler(ctx, request)
            held = time.perf_counter() - started
            if held > SLOW_HANDLER_S:  # the event loop was held: every client waited
                log.warning("%s v%d held the event loop for %.0f ms (connection %s from %s)",
                            spec.key.name, version, held * 1000, self.id, self.peer)  # fmt: skip
            if inspect.isawaitable(result):
                result = await result
        except CloseConnection:
            stats.request_done(spec.key.name, time.perf_counter() - started, {"CLOSED"})
            raise
        except InvalidRequestError as exc:
            stats.request_done(spec.key.name, time.perf_counter() - started, {"INVALID_REQUEST"})
            return self._invalid_request(spec.key.name, api_key, version, correlation_id, exc)
        except Exception as exc:
            stats.request_done(spec.key.name, time.perf_counter() - started, {"INTERNAL"})
            raise self._bug("handler", spec.key.name, version, exc) from exc
        if isinstance(result, Deferred):
            return asyncio.ensure_future(
                self._finish(result, spec.key.name, api_key, version, correlation_id, started)
            )
        if result is NO_RESPONSE:
            stats.request_done(spec.key.name, time.perf_counter() - started)
            return None
        stats.request_done(spec.key.name, time.perf_counter() - started, response_errors(result))
        if not isinstance(result, EncodesItself) and holds_more_entries(
            result, ENCODE_IN_THREAD_ENTRIES
        ):
            encoded = asyncio.to_thread(
                self._encode, spec.key.name, api_key, version, correlation_id, result
            )
            return asyncio.ensure_future(encoded)  # written in order like a Deferred answer
        return self._encode(spec.key.name, api_key, version, correlation_id, result)

    async def _finish(
        self,
        deferred: Deferred,
        name: str,
        api_key: int,
        version: int,
        correlation_id: int,
        started: float,
    ) -> Response | None:
        stats = self.broker.stats
        stats.produce_waiting += 1  # here, not at dispatch: a task cancelled unstarted never runs
        try:
            result = await deferred.response
        except CloseConnection:
            stats.request_done(name, time.perf_counter() - started, {"CLOSED"})
            raise
        except Exception as exc:
            stats.request_done(name, time.perf_counter() - started, {"INTERNAL"})
            raise self._bug("handler", name, version, exc) from exc
        finally:
            stats.produce_waiting -= 1
        if result is NO_RESPONSE:
            stats.request_done(name, time.perf_counter() - started)
            return None
        stats.request_done(name, time.perf_counter() - started, response_errors(result))
        return self._encode(name, api_key, version, correlation_id, result)

    def _encode(
        self, name: str, api_key: int, version: int, correlation_id: int, result: object
    ) -> Response:
        try:
            if isinstance(result, EncodesItself):  # Fetch: headers around file ranges
                return result.frame(correlation_id)
            return encode_response(api_key, version, correlation_id, result)
        except Exception as exc:
            raise self._bug("response encoder", name, version, exc) from exc

    def _invalid_request(
        self, name: str, api_key: int, version: int, correlation_id: int, exc: Exception
    ) -> bytes:
        """Kafka's answer to a request that breaks its schema's rules: INVALID_REQUEST in
        the response's top-level error field, or a closed connection when it has none.
        The client's bytes are at fault, so no traceback is logged."""
        self.broker.client_faults.note(
            "invalid requests", logging.INFO,
            "invalid %s v%d request on connection %s from %s: %s",
            name, version, self.id, self.peer, exc,
        )  # fmt: skip
        out = error_response(api_key, version, correlation_id, ErrorCode.invalid_request)
        if out is None:
            raise CloseConnection(f"INVALID_REQUEST: {exc}")
        return out

    def _bug(self, where: str, name: str, version: int, exc: Exception) -> CloseConnection:
        """An exception the client's input should never cause: logged as a bug."""
        log.error(
            "BUG: %s for %s v%d failed on connection %s from %s",
            where, name, version, self.id, self.peer, exc_info=exc,
        )  # fmt: skip
        return CloseConnection(f"internal error: {exc!r}")
