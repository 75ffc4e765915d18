"""Kafka's size-prefixed framing as a pure parser: bytes in, frames out, and back.

No sockets and no asyncio here (``frame_protocol`` adds those). The parser owns
the receive memory so a BufferedProtocol can recv straight into it: small frames
are cut out of a rolling buffer, and a large frame (a produce request) is
received directly into a bytearray of its own, so its bytes are not copied again
on the way to the handler.

Memory follows the bytes that arrived, never a size prefix alone: a large frame's
buffer starts at ``LARGE_STEP`` at most and doubles as it fills (a 100 MiB prefix
followed by silence costs 1 MiB), a connection's first read goes to a 4 KiB buffer,
and the 256 KiB rolling buffer is borrowed from a small shared pool only while it
holds bytes, so an idle connection holds none.

Frames of up to ``RECYCLED`` bytes above ``LARGE`` (produce requests: clients cap them
near 1 MB) go to recycled 1 MiB buffers and come out as a ``memoryview`` of one. Why: a
fresh 1 MiB bytearray per request costs a page fault per 4 KiB when it is mapped and an
munmap when it dies, which was a third of the broker's CPU per produced GB. A recycled
buffer is taken again only once nothing references it any more (the frame and every view
of it are gone), so a request still holding its records keeps its buffer.

Each allocation or growth of a large frame's buffer (a recycled one included) first asks
``allow`` (the broker-wide ``queued.max.request.bytes`` budget); refused, the parser stops
taking bytes (``starved``) until ``retry`` succeeds.
"""

from __future__ import annotations

import io
import struct
import sys
from collections import deque
from collections.abc import Callable

SIZE_PREFIX = struct.Struct(">i")
ROLLING = 256 * 1024
LARGE = 64 * 1024  # frames above this get a buffer of their own
SMALL = 4 * 1024  # a connection's first receive buffer; ROLLING once bytes keep coming
LARGE_STEP = 1024 * 1024  # a large frame's first allocation; then it doubles as bytes come
_POOL_SIZE = 16
_pool: list[bytearray] = []  # free rolling buffers (one event loop thread uses them)
RECYCLED = 1024 * 1024  # large frames up to this size are received into recycled buffers
_RECYCLED_COUNT = 8  # at most this many recycled buffers (8 MiB) are ever kept
_recycled: list[bytearray] = []  # owned here for good; in use while referenced elsewhere


def _unreferenced_count() -> int:
    """sys.getrefcount of a buffer only the pool holds, seen from the same loop shape as
    ``_take_recycled`` (the list, the loop variable, the call's argument: 3 on CPython
    3.11; measured rather than assumed, as borrowed references change it in 3.14)."""
    probe = [bytearray(1)]
    for buf in probe:
        return sys.getrefcount(buf)
    raise AssertionError("unreachable")


_UNREFERENCED = _unreferenced_count()


def _borrow() -> bytearray:
    return _pool.pop() if _pool else bytearray(ROLLING)


def _give_back(buf: bytearray) -> None:
    if len(_pool) < _POOL_SIZE:
        _pool.append(buf)


def _take_recycled() -> bytearray | None:
    """A recycled buffer that no frame or view references any more (a new one while
    fewer than ``_RECYCLED_COUNT`` exist), or None: then allocate as before."""
    for buf in _recycled:
        if sys.getrefcount(buf) == _UNREFERENCED:
            return buf
    if len(_recycled) < _RECYCLED_COUNT:
        _recycled.append(bytearray(RECYCLED))
        return _recycled[-1]
    return None


Frame = bytes | bytearray | memoryview


def _always(nbytes: int) -> bool:
    return True


class FrameError(Exception):
    """The peer sent a size Kafka would refuse; the connection must close."""


class FrameParser:
    """Cuts frames out of a byte stream, rejecting sizes below 0 or above ``max_size``.

    A forged size is refused before any memory is reserved for it. After an error
    the frames already cut are still handed out, then ``next_frame`` raises.
    """

    def __init__(self, max_size: int, allow: Callable[[int], bool] | None = None) -> None:
        self.max_size = max_size
        self._allow = allow if allow is not None else _always
        self._buf: bytearray | None = None  # borrowed while it holds bytes
        self._view = memoryview(b"")
        self._start = self._end = 0
        self._large: bytearray | None = None
        self._large_got = 0
        self._large_size = 0
        self._large_cap = 0  # bytes of ``_large`` to fill now: min(its length, the frame)
        self._frames: deque[Frame] = deque()
        self.queued_bytes = 0  # total size of the frames in ``_frames``
        self.error: FrameError | None = None
        self.starved = False  # a large buffer's allocation was refused: take no bytes

    # -- bytes in ------------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Writable memory for the next received bytes (the BufferedProtocol contract)."""
        if self._large is not None:
            return memoryview(self._large)[self._large_got : self._large_cap]
        if self._buf is None:
            # A fresh read starts in a small buffer: a connection that sends a few bytes
            # and stops (or a thousand of them) holds little.
            self._set_buffer(bytearray(SMALL))
            assert self._buf is not None
        if self.error is not None:
            return self._view  # the stream is dead: whatever arrives is dropped
        if self._end == len(self._buf):
            self._compact()
            if self._end == len(self._buf):  # full of one frame's bytes: grow to ROLLING
                small = self._buf
                self._set_buffer(_borrow())
                self._buf[: self._end] = small
        return self._view[self._end :]

    def _set_buffer(self, buf: bytearray) -> None:
        self._buf = buf
        self._view = memoryview(buf)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``."""
        if self._large is not None:
            self._large_got += nbytes
            if self._large_got == self._large_cap:
                if self._large_got == self._large_size:
                    self._queue_large(self._large, self._large_size)
                    self._large = None
                else:
                    self._grow()
        elif self.error is None:
            self._end += nbytes
            self._cut_frames()
        if self._buf is not None and self._start == self._end:
            self._release()

    def _grow(self) -> None:
        """Grow the full large buffer with the bytes that came, never ahead of them."""
        assert self._large is not None
        size = min(self._large_size, 2 * len(self._large))
        if not self._allow(size - len(self._large)):
            self.starved = True
            return
        grown = bytearray(size)
        grown[: self._large_got] = self._large
        self._large = grown
        self._large_cap = size

    def retry(self) -> bool:
        """Ask again for the memory refused before; True once bytes may come again."""
        if self.starved:
            self.starved = False
            if self._large is not None:
                self._grow()
            else:
                self._cut_frames()
                if self._buf is not None and self._start == self._end:
                    self._release()
        return not self.starved

    @property
    def partial_bytes(self) -> int:
        """Bytes held for the frame still arriving (counted in the budget): a large
        frame's buffer, or the bytes of a small one (and of size prefixes) waiting in
        the rolling buffer."""
        if self._large is not None:
            return self._large_cap
        return self._end - self._start

    @property
    def receiving_large(self) -> bool:
        """A large frame's own buffer is being filled (the budget's overdraft is its)."""
        return self._large is not None

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
            frame = self._frames.popleft()
            self.queued_bytes -= len(frame)
            return frame
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
        assert self._buf is not None
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
            recycled = _take_recycled() if LARGE < size <= RECYCLED else None
            if have >= size:
                if recycled is not None:
                    recycled[:size] = self._view[body : body + size]
                    self._queue_large(recycled, size)
                else:
                    self._frames.append(bytes(self._view[body : body + size]))
                    self.queued_bytes += size
                self._start = body + size
                continue
            if size > LARGE:
                first = min(size, len(recycled) if recycled else max(LARGE_STEP, have))
                if not self._allow(first):
                    self.starved = True  # its bytes wait in the rolling buffer
                    return
                if recycled is None:
                    recycled = bytearray(first)
                self._large = recycled
                self._large[:have] = self._view[body : self._end]
                self._large_got = have
                self._large_size = size
                self._large_cap = min(size, len(recycled))
                self._start = self._end = 0
            elif self._start > 0 and len(self._buf) - self._start < SIZE_PREFIX.size + size:
                self._compact()
            return

    def _queue_large(self, buf: bytearray, size: int) -> None:
        # A recycled buffer is longer than its frame: the frame is a view of its start.
        self._frames.append(buf if len(buf) == size else memoryview(buf)[:size])
        self.queued_bytes += size

    def _release(self) -> None:
        """Hand the empty rolling buffer back: an idle connection holds no memory."""
        assert self._buf is not None
        if len(self._buf) == ROLLING:  # never resized, so views the loop still holds are safe
            _give_back(self._buf)
        self._buf = None
        self._view = memoryview(b"")
        self._start = self._end = 0

    def release(self) -> None:
        """The connection closed: drop every buffer it held."""
        if self._buf is not None:
            self._release()
        self._large = None
        self._frames.clear()
        self.queued_bytes = 0
        # ``allow`` is usually a method of the protocol that owns this parser: a cycle
        # that only a full garbage collection would free.
        self._allow = _always

    def _compact(self) -> None:
        assert self._buf is not None
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
