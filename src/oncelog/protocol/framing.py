"""Size-prefixed frames on an asyncio stream."""

from __future__ import annotations

import asyncio


class FrameError(Exception):
    """The peer sent a size Kafka would refuse; the connection must close."""


async def read_frame(reader: asyncio.StreamReader, max_size: int) -> bytes | None:
    """Next request frame, or None on a clean end of stream between frames."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("connection closed inside a size prefix") from exc
        return None
    size = int.from_bytes(prefix, "big", signed=True)
    if size < 0:
        raise FrameError(f"invalid negative frame size {size}")
    if size > max_size:
        raise FrameError(f"frame of {size} bytes exceeds socket.request.max.bytes={max_size}")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(f"connection closed after {len(exc.partial)} of {size} frame bytes") from exc
