"""Size-prefixed frames read straight into their own buffers.

An asyncio BufferedProtocol lets the event loop recv_into our memory: small
frames are cut out of a rolling buffer, and a large frame (a produce request)
is received directly into a bytearray of its exact size, so its bytes are not
copied again on the way to the handler.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable

_SIZE = struct.Struct(">i")
ROLLING = 256 * 1024
LARGE = 64 * 1024  # frames above this get a buffer of their own


class FrameError(Exception):
    """The peer sent a size Kafka would refuse; the connection must close."""


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(self, max_size: int, on_connect: Callable[[FrameProtocol], None], max_queued: int = 64) -> None:
        self.max_size = max_size
        self.on_connect = on_connect
        self.max_queued = max_queued
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray(ROLLING)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._large: bytearray | None = None
        self._large_got = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._error: Exception | None = None
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    # -- asyncio callbacks -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass
        self.on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_got :]
        if self._end == len(self._buf):
            pending = self._end - self._start
            self._buf[:pending] = self._buf[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_got += nbytes
            if self._large_got == len(self._large):
                self._frames.append(self._large)
                self._large = None
        else:
            self._end += nbytes
            self._cut_frames()
        self._wake()
        if len(self._frames) >= self.max_queued and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

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

    def resume_writing(self) -> None:
        if self._drained is not None:
            if not self._drained.done():
                self._drained.set_result(None)
            self._drained = None

    # -- parsing -----------------------------------------------------------------
    def _cut_frames(self) -> None:
        while self._error is None and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0:
                self._error = FrameError(f"invalid negative frame size {size}")
                return
            if size > self.max_size:
                self._error = FrameError(f"frame of {size} bytes exceeds socket.request.max.bytes={self.max_size}")
                return
            body = self._start + 4
            have = self._end - body
            if have >= size:
                self._frames.append(bytes(self._view[body : body + size]))
                self._start = body + size
                continue
            if size > LARGE:
                self._large = bytearray(size)
                self._large[:have] = self._view[body : self._end]
                self._large_got = have
                self._start = self._end = 0
            elif self._start > 0 and len(self._buf) - self._start < 4 + size:
                pending = self._end - self._start
                self._buf[:pending] = self._buf[self._start : self._end]
                self._start, self._end = 0, pending
            return

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- consumer side -------------------------------------------------------------
    async def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame; None on a clean end of stream between frames."""
        while True:
            if self._frames:
                frame = self._frames.popleft()
                if self._paused and len(self._frames) < self.max_queued // 2 and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
                return frame
            if self._error is not None:
                raise self._error
            if self._eof:
                if self._large is not None or self._end > self._start:
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
