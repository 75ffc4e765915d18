"""Kafka's size-prefixed framing as a pure parser: bytes in, frames out, and back.

No sockets and no asyncio here (``frame_protocol`` adds those). The parser owns
the receive memory so a BufferedProtocol can recv straight into it: small frames
are cut out of a rolling buffer, and a large frame (a produce request) is
received directly into a bytearray of its exact size, so its bytes are not
copied again on the way to the handler.
"""

from __future__ import annotations

import io
import struct
from collections import deque

SIZE_PREFIX = struct.Struct(">i")
ROLLING = 256 * 1024
LARGE = 64 * 1024  # frames above this get a buffer of their own

Frame = bytes | bytearray


class FrameError(Exception):
    """The peer sent a size Kafka would refuse; the connection must close."""


class FrameParser:
    """Cuts frames out of a byte stream, rejecting sizes below 0 or above ``max_size``.

    A forged size is refused before any memory is reserved for it. After an error
    the frames already cut are still handed out, then ``next_frame`` raises.
    """

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buf = bytearray(ROLLING)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._large: bytearray | None = None
        self._large_got = 0
        self._frames: deque[Frame] = deque()
        self.error: FrameError | None = None

    # -- bytes in ------------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Writable memory for the next received bytes (the BufferedProtocol contract)."""
        if self._large is not None:
            return memoryview(self._large)[self._large_got :]
        if self.error is not None:
            return self._view  # the stream is dead: whatever arrives is dropped
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``."""
        if self._large is not None:
            self._large_got += nbytes
            if self._large_got == len(self._large):
                self._frames.append(self._large)
                self._large = None
        elif self.error is None:
            self._end += nbytes
            self._cut_frames()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` in through ``get_buffer`` (for tests and non-buffered transports)."""
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    # -- frames out ----------------------------------------------------------------
    def next_frame(self) -> Frame | None:
        """The next complete frame, None if none is complete yet; raises FrameError
        once the queued frames are gone and the stream is broken."""
        if self._frames:
            return self._frames.popleft()
        if self.error is not None:
            raise self.error
        return None

    @property
    def queued(self) -> int:
        """Complete frames not yet taken."""
        return len(self._frames)

    @property
    def inside_frame(self) -> bool:
        """Bytes of an incomplete frame are held (an end of stream now is an error)."""
        return self._large is not None or self._end > self._start

    # -- parsing -------------------------------------------------------------------
    def _cut_frames(self) -> None:
        while self.error is None and self._end - self._start >= SIZE_PREFIX.size:
            (size,) = SIZE_PREFIX.unpack_from(self._buf, self._start)
            if size < 0:
                self.error = FrameError(f"invalid negative frame size {size}")
                return
            if size > self.max_size:
                self.error = FrameError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes={self.max_size}"
                )
                return
            body = self._start + SIZE_PREFIX.size
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
            elif self._start > 0 and len(self._buf) - self._start < SIZE_PREFIX.size + size:
                self._compact()
            return

    def _compact(self) -> None:
        pending = self._end - self._start
        self._buf[:pending] = self._buf[self._start : self._end]
        self._start, self._end = 0, pending


# -- frames in, bytes out ----------------------------------------------------------
def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    return SIZE_PREFIX.pack(len(payload)) + payload


def begin_frame(buf: io.BytesIO) -> None:
    """Reserve the size prefix; write the payload into ``buf``, then ``end_frame``."""
    buf.write(b"\0" * SIZE_PREFIX.size)


def end_frame(buf: io.BytesIO) -> bytes:
    """Fill in the size prefix reserved by ``begin_frame`` and return the frame."""
    data = buf.getbuffer()
    SIZE_PREFIX.pack_into(data, 0, len(data) - SIZE_PREFIX.size)
    del data  # a live export would block getvalue()
    return buf.getvalue()
