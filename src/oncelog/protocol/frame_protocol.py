"""asyncio flow control around ``FrameParser``: recv_into its memory, wait, back-pressure.

The event loop writes received bytes straight into the parser's buffers
(BufferedProtocol), so a large frame lands in its own bytearray with no extra
copy. Reading pauses while too many frames wait to be served, and while the
client leaves its responses unread (the transport's send buffer is above its
high-water mark, where writers wait too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from oncelog.protocol.framing import Frame, FrameError, FrameParser
from oncelog.protocol.request_budget import RequestBudget


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(
        self,
        max_size: int,
        on_connect: Callable[[FrameProtocol], None],
        max_queued: int = 64,
        budget: RequestBudget | None = None,
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
        self._wake()
        self.resume_writing()

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
                if self.parser.partial_bytes == 0:
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
