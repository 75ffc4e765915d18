"""FrameProtocol over a real loopback socket: frames in order, back-pressure, clean and unclean ends."""

from __future__ import annotations

import asyncio

import pytest

from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.framing import LARGE, FrameError, encode_frame


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
