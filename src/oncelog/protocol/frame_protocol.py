"""asyncio flow control around ``FrameParser``: recv_into its memory, wait, back-pressure.

The event loop writes received bytes straight into the parser's buffers
(BufferedProtocol), so a large frame lands in its own bytearray with no extra
copy. Reading pauses while too many frames wait to be served, and while the
client leaves its responses unread (the transport's send buffer is above its
high-water mark, where writers wait too).

A ``ResponseFrame`` (a Fetch response: headers plus file ranges) is sent by ``send``
straight to the socket, ranges with ``os.sendfile``: see ``_send_direct``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from oncelog.protocol.framing import Frame, FrameError, FrameParser
from oncelog.protocol.page_cache import PageWarmer
from oncelog.protocol.request_budget import RequestBudget
from oncelog.protocol.response_frame import ResponseFrame

# Writable wake-ups in a row in which the transport's own buffer does not shrink before
# ``send`` gives up on sendfile for that response and writes through the transport.
_FLUSH_STALLS = 50


def _connected(protocol: FrameProtocol) -> None:
    pass


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(
        self,
        max_size: int,
        on_connect: Callable[[FrameProtocol], None],
        max_queued: int = 64,
        budget: RequestBudget | None = None,
        sendfile: bool = True,
        warmer: PageWarmer | None = None,
    ) -> None:
        self.parser = FrameParser(max_size, self._reserve)
        self.budget = budget if budget is not None else RequestBudget()
        self._held = 0  # bytes this connection has charged to the budget
        self.on_connect = on_connect
        self.max_queued = max_queued
        self.transport: asyncio.Transport | None = None
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None
        # False on TLS listeners: the socket carries encrypted bytes, never raw file data.
        self.sendfile = sendfile
        # Reads a response's cold file ranges into the page cache off the loop first.
        self.warmer = warmer
        self._writable: asyncio.Future[None] | None = None
        self._watched: int | None = None  # the socket duplicate watched for writability
        self._lost = False
        self.sendfile_bytes = 0  # file bytes sent by sendfile (tests, metrics)

    # -- asyncio callbacks -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transport is not an asyncio.Transport subclass
        self.transport = transport  # type: ignore[assignment]
        self.on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.parser.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        frames = self.parser.queued
        self.parser.buffer_updated(nbytes)
        self._account(frames)

    def _account(self, frames_before: int) -> None:
        """Charge the budget for the frames cut and the memory of the partial frame."""
        parser = self.parser
        if parser.error is not None:
            self._wake()  # the stream is broken: the connection must learn it
        held = parser.queued_bytes + parser.partial_bytes
        if parser.queued != frames_before or held != self._held:
            self.budget.take(parser.queued - frames_before, held - self._held)
            self._held = held
        if parser.queued != frames_before:
            self._wake()
            if parser.queued >= self.max_queued or self.budget.spent:
                # Muted while its own requests wait, as Kafka mutes a channel; it reads
                # again once it has served them (see ``next_frame``).
                self._pause_reading()
        if parser.starved:
            self._pause_reading()  # until the budget gives memory back (``_memory_back``)

    def _reserve(self, nbytes: int) -> bool:
        if not self.budget.reserve(self, nbytes, self._memory_back):
            return False
        self._held += nbytes
        return True

    def _memory_back(self) -> None:
        frames = self.parser.queued
        if self.parser.retry():
            self._account(frames)
            self._maybe_resume_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = True
        self._wake()
        self.resume_writing()
        self._on_writable()
        # The transport holds this protocol: dropping it here breaks the cycle, so a
        # closed connection is freed at once instead of by a full garbage collection
        # (a connection storm made those run every second, each a pause for every client).
        self.transport = None

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()
        # A client that does not read its responses gets no more requests read either:
        # its requests would only pile up behind the responses it leaves unread.
        self._pause_reading()

    def resume_writing(self) -> None:
        if self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None
        self._maybe_resume_reading()

    def _pause_reading(self) -> None:
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self._paused = True
            self.transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        """Read again once the responses drain and the queued requests are mostly served."""
        queued = self.parser.queued
        if (
            self._paused
            and self._drained is None
            and not self.parser.starved
            and (queued == 0 or (queued < self.max_queued // 2 and not self.budget.spent))
            and self.transport is not None
            and not self.transport.is_closing()
        ):
            self._paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- consumer side -------------------------------------------------------------
    async def next_frame(self) -> Frame | None:
        """The next complete frame; None on a clean end of stream between frames."""
        while True:
            frame = self.parser.next_frame()  # raises FrameError once the stream is broken
            if frame is not None:
                self._held -= len(frame)
                self.budget.give(1, len(frame))
                if not self.parser.receiving_large:
                    self.budget.end_overdraft(self)
                self._maybe_resume_reading()
                return frame
            if self._eof:
                if self.parser.inside_frame:
                    raise FrameError("connection closed inside a frame")
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)

    async def send(self, out: bytes | ResponseFrame) -> None:
        """Write one whole response and wait for room: the next one may follow at once.

        Responses go out strictly one after the other: a ``ResponseFrame`` is complete
        on the socket (or in the transport's buffer) before this returns, so nothing
        written next can overtake or split it."""
        if not isinstance(out, ResponseFrame):
            self.write(out)
            await self.drain()
            return
        try:
            if self.warmer is not None:
                await self.warmer.ready(out.ranges())
            fd = self._socket_duplicate()
            if fd is None:
                await self._send_through_transport(out)
                return
            try:
                if await self._transport_flushed(fd):
                    await self._send_direct(fd, out)
                else:
                    await self._send_through_transport(out)
            finally:
                if self._watched is not None:
                    asyncio.get_running_loop().remove_writer(fd)
                    self._watched = None
                os.close(fd)
        finally:
            out.close()

    def _socket_duplicate(self) -> int | None:
        """A duplicate of the socket's descriptor when sendfile may be used: a plain TCP
        socket (never TLS, whose socket carries encrypted bytes). None: write through
        the transport instead."""
        transport = self.transport
        if not self.sendfile or transport is None or transport.is_closing():
            return None
        if transport.get_extra_info("sslcontext") is not None:
            return None
        sock = transport.get_extra_info("socket")
        return None if sock is None else os.dup(sock.fileno())

    async def _transport_flushed(self, fd: int) -> bool:
        """Wait until the transport's own buffer (an earlier response) reached the socket:
        sendfile must not overtake it. False if it stops shrinking (then the response
        goes through the transport, behind it)."""
        transport = self.transport
        assert transport is not None
        stalls, left = 0, transport.get_write_buffer_size()
        while left > 0 and stalls < _FLUSH_STALLS:
            # The transport flushes in its own writable callback, which runs before this
            # coroutine resumes.
            await self._wait_writable(fd)
            now = transport.get_write_buffer_size()
            stalls = stalls + 1 if now >= left else 0
            left = now
        return left == 0

    async def _send_direct(self, fd: int, out: ResponseFrame) -> None:
        """The zero-copy path: headers with ``os.write``, record ranges with
        ``os.sendfile`` (page cache to socket, no copy through Python), on a duplicate of
        the socket's non-blocking descriptor. The transport is bypassed while its buffer
        is empty and the connection writes nothing else meanwhile (one response at a
        time), so the bytes on the wire stay in order. A full socket (EAGAIN) waits for
        writability on the duplicate; a client gone mid-send raises ConnectionError."""
        for part in out.parts:
            if isinstance(part, bytes):
                view = memoryview(part)
                while view:
                    try:
                        view = view[os.write(fd, view) :]
                    except BlockingIOError:
                        await self._wait_writable(fd)
            else:
                position, left = part.position, part.length
                while left > 0:
                    try:
                        sent = os.sendfile(fd, part.fd, position, left)
                    except BlockingIOError:
                        await self._wait_writable(fd)
                        continue
                    if sent == 0:  # the frame's size is already on the wire: abandon it
                        raise ConnectionAbortedError(
                            f"file shorter than the response range at {position}"
                        )
                    position += sent
                    left -= sent
                    self.sendfile_bytes += sent

    async def _send_through_transport(self, out: ResponseFrame) -> None:
        """TLS (or a transport still holding bytes): each range is read just before it is
        written, so a large response is never whole in memory."""
        for part in out.parts:
            self.write(part if isinstance(part, bytes) else part.read())
            await self.drain()

    async def _wait_writable(self, fd: int) -> None:
        """Wait until ``fd`` (the socket's duplicate) is writable. It stays watched until
        the response is sent (``send`` unwatches it): one epoll registration per
        response, not one per full socket buffer."""
        loop = asyncio.get_running_loop()
        self._writable = loop.create_future()
        if self._watched != fd:
            loop.add_writer(fd, self._on_writable)
            self._watched = fd
        try:
            await self._writable
        finally:
            self._writable = None
        if self._lost or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the connection closed while a response was sent")

    def _on_writable(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if self._drained is not None:
            await self._drained

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def release(self) -> None:
        """The connection is done: return its unserved frames to the budget and drop
        every receive buffer."""
        self.budget.give(self.parser.queued, self._held)
        self._held = 0
        self.budget.end_overdraft(self)
        self.parser.release()
        self.on_connect = _connected  # its closure holds the broker, not needed any more
