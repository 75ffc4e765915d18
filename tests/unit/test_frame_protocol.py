"""FrameProtocol over a real loopback socket: frames in order, back-pressure, clean and unclean ends."""

from __future__ import annotations

import asyncio
import gc
import os
import weakref
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.framing import LARGE, FrameError, encode_frame
from oncelog.protocol.response_frame import FileRange, ResponseFrame


async def serve_one(
    max_queued: int = 8,
) -> tuple[asyncio.Server, asyncio.Future[FrameProtocol], int]:
    loop = asyncio.get_running_loop()
    connected: asyncio.Future[FrameProtocol] = loop.create_future()
    server = await loop.create_server(
        lambda: FrameProtocol(1 << 20, connected.set_result, max_queued=max_queued), "127.0.0.1", 0
    )
    return server, connected, server.sockets[0].getsockname()[1]


def test_frames_arrive_in_order_and_reading_pauses_while_they_queue() -> None:
    async def main() -> None:
        server, connected, port = await serve_one(max_queued=8)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        frames = [bytes([i]) * (LARGE + 1 if i % 5 == 0 else 100) for i in range(40)]
        writer.write(b"".join(encode_frame(f) for f in frames))
        await writer.drain()
        proto = await connected
        for _ in range(200):  # let the loop deliver until reading pauses
            if proto._paused:
                break
            await asyncio.sleep(0.005)
        assert proto._paused and 8 <= proto.parser.queued < 40
        got = [await proto.next_frame() for _ in frames]
        assert got == frames and not proto._paused
        writer.close()
        assert await proto.next_frame() is None  # clean end between frames
        server.close()

    asyncio.run(main())


def test_end_inside_a_frame_is_an_error() -> None:
    async def main() -> None:
        server, connected, port = await serve_one()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode_frame(b"whole") + encode_frame(b"cut short")[:7])
        await writer.drain()
        writer.close()
        proto = await connected
        assert await proto.next_frame() == b"whole"
        with pytest.raises(FrameError, match="closed inside a frame"):
            await proto.next_frame()
        server.close()

    asyncio.run(main())


# -- ResponseFrame: headers as bytes, file ranges with sendfile --------------------------


def _runners() -> list[object]:
    import uvloop

    return [pytest.param(asyncio.run, id="asyncio"), pytest.param(uvloop.run, id="uvloop")]


def _range_file(tmp_path: Path, size: int) -> tuple[int, bytes]:
    data = os.urandom(size)
    path = tmp_path / "segment"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), data


@pytest.mark.parametrize("run", _runners())
@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "transport"])
def test_response_frames_go_out_whole_and_in_order(
    tmp_path: Path, run: Callable[[Coroutine[Any, Any, None]], None], sendfile: bool
) -> None:
    """Large ranges fill the socket (EAGAIN mid-range) while the client reads slowly; a
    bytes response written before them is still in the transport's buffer; the stream the
    client reads is exactly the responses, in order, each whole."""
    fd, data = _range_file(tmp_path, 6 << 20)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[FrameProtocol] = loop.create_future()
        server = await loop.create_server(
            lambda: FrameProtocol(1 << 20, connected.set_result, sendfile=sendfile),
            "127.0.0.1",
            0,
        )
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        proto = await connected
        big = b"b" * (3 << 20)
        frames: list[bytes | ResponseFrame] = [
            big,  # not drained before the next: the transport still holds most of it
            ResponseFrame([b"head-1", FileRange(fd, 0, 4 << 20), b"mid", FileRange(fd, 5, 9)]),
            b"small",
            ResponseFrame([b"head-2", FileRange(fd, 1 << 20, 5 << 20), b"tail"]),
        ]
        expected = (
            big
            + b"head-1" + data[: 4 << 20] + b"mid" + data[5:14]
            + b"small"
            + b"head-2" + data[1 << 20 : 6 << 20] + b"tail"
        )  # fmt: skip

        async def send_all() -> None:
            proto.write(frames[0])  # no drain: the next frame starts with a full buffer
            for f in frames[1:]:
                await proto.send(f)

        async def read_slowly() -> bytes:
            got = bytearray()
            while len(got) < len(expected):
                got += await reader.read(256 << 10)
                await asyncio.sleep(0.001)
            return bytes(got)

        _, got = await asyncio.gather(send_all(), read_slowly())
        assert got == expected
        # Both ranges of 4 and 5 MB went by sendfile (the 9 bytes may too), or none did.
        assert proto.sendfile_bytes - ((9 << 20) if sendfile else 0) in (0, 9)
        assert all(r.fd == -1 for f in frames if isinstance(f, ResponseFrame) for r in f.ranges())
        writer.close()
        server.close()

    try:
        run(main())
    finally:
        os.close(fd)


@pytest.mark.parametrize("run", _runners())
def test_a_client_gone_mid_send_ends_the_send_with_a_connection_error(
    tmp_path: Path, run: Callable[[Coroutine[Any, Any, None]], None]
) -> None:
    fd, _ = _range_file(tmp_path, 8 << 20)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[FrameProtocol] = loop.create_future()
        server = await loop.create_server(
            lambda: FrameProtocol(1 << 20, connected.set_result), "127.0.0.1", 0
        )
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        proto = await connected
        frame = ResponseFrame([b"head", FileRange(fd, 0, 8 << 20)])
        sending = asyncio.ensure_future(proto.send(frame))
        await reader.read(1 << 16)  # the send has started and fills the socket
        writer.transport.abort()  # the client resets the connection without reading on
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(sending, 10)
        assert all(r.fd == -1 for r in frame.ranges())
        server.close()

    try:
        run(main())
    finally:
        os.close(fd)


@pytest.mark.parametrize("run", _runners())
def test_closing_the_transport_mid_send_wakes_the_sender(
    tmp_path: Path, run: Callable[[Coroutine[Any, Any, None]], None]
) -> None:
    """The broker closes a connection (shutdown) while a response waits for a client that
    reads nothing: the send ends with a ConnectionError instead of waiting forever."""
    fd, _ = _range_file(tmp_path, 8 << 20)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[FrameProtocol] = loop.create_future()
        server = await loop.create_server(
            lambda: FrameProtocol(1 << 20, connected.set_result), "127.0.0.1", 0
        )
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        proto = await connected
        sending = asyncio.ensure_future(proto.send(ResponseFrame([FileRange(fd, 0, 8 << 20)])))
        await asyncio.sleep(0.2)
        assert not sending.done()  # the client reads nothing: the socket is full
        proto.close()
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(sending, 10)
        writer.close()
        server.close()

    try:
        run(main())
    finally:
        os.close(fd)


def test_a_closed_connection_is_freed_without_the_cycle_collector() -> None:
    """A connection storm closes hundreds of connections a second: each closed one must
    be freed by reference counting, or full collections run every second (each a pause
    for every client). Over a real socket, as the broker's transports hold protocols."""

    async def main() -> None:
        server, connected, port = await serve_one()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode_frame(b"whole") + encode_frame(b"x" * (LARGE + 10))[:100])
        await writer.drain()
        proto = await connected
        frame = await proto.next_frame()  # (an assert's rewriting would keep a reference)
        assert frame == b"whole"
        gone = weakref.ref(proto)
        parser = weakref.ref(proto.parser)
        proto.close()
        proto.release()
        writer.close()
        server.close()
        await server.wait_closed()
        del proto, connected, server  # the test's own references (the future's result)
        for _ in range(20):  # the transport calls connection_lost a loop turn later
            await asyncio.sleep(0.01)
        assert gone() is None, "left to the cycle collector"
        assert parser() is None

    gc.disable()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
