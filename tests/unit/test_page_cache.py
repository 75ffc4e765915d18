"""PageWarmer on real files: a cold range is found without blocking, read into the page
cache by the executor, and then sent over a real socket byte for byte."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.page_cache import PageWarmer
from oncelog.protocol.response_frame import FileRange, ResponseFrame
from oncelog.testing.faults import evict_file_pages

MB = 1 << 20


def written(path: Path, size: int) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    return data


def file_range(path: Path, position: int, length: int) -> FileRange:
    fd = os.open(path, os.O_RDONLY)
    try:
        return FileRange(fd, position, length)
    finally:
        os.close(fd)


@pytest.fixture
def warmer() -> PageWarmer:
    pool = ThreadPoolExecutor(2)
    yield PageWarmer(pool)
    pool.shutdown()


def test_an_evicted_range_is_cold_until_warmed_then_hot(tmp_path: Path, warmer) -> None:
    path = tmp_path / "segment.log"
    written(path, 8 * MB)
    evict_file_pages(path)
    r = file_range(path, 3 * MB + 5, 4 * MB)
    try:
        assert warmer.enabled
        assert warmer.cold(r)
        asyncio.run(warmer.ready([r]))
        assert warmer.cold_bytes == 4 * MB and warmer.cold_ranges == 1
        assert not warmer.cold(r)  # every probed page is resident now
        asyncio.run(warmer.ready([r]))  # hot: nothing read, nothing counted
        assert warmer.cold_bytes == 4 * MB and warmer.cold_ranges == 1
    finally:
        r.close()


def test_a_range_cached_by_a_recent_write_is_hot(tmp_path: Path, warmer) -> None:
    path = tmp_path / "segment.log"
    written(path, 2 * MB)
    r = file_range(path, 0, 2 * MB)
    try:
        asyncio.run(warmer.ready([r]))
        assert warmer.cold_bytes == 0
    finally:
        r.close()


def test_a_range_past_the_end_of_its_file_is_left_to_the_send(tmp_path: Path, warmer) -> None:
    # A range the file no longer covers (truncated meanwhile) is not the warmer's to
    # report: the send fails on it (ConnectionAbortedError), as it did before.
    path = tmp_path / "segment.log"
    written(path, MB)
    evict_file_pages(path)
    r = file_range(path, 2 * MB, MB)
    try:
        assert not warmer.cold(r)
    finally:
        r.close()


def test_the_warmed_response_reaches_the_client_byte_for_byte(tmp_path: Path, warmer) -> None:
    path = tmp_path / "segment.log"
    data = written(path, 6 * MB)
    evict_file_pages(path)

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[FrameProtocol] = loop.create_future()
        server = await loop.create_server(
            lambda: FrameProtocol(MB, connected.set_result, warmer=warmer), "127.0.0.1", 0
        )
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        proto = await connected
        header = (2 * MB + 3).to_bytes(4, "big")
        out = ResponseFrame([header, b"abc", file_range(path, MB, 2 * MB)])
        send = asyncio.create_task(proto.send(out))
        got = await reader.readexactly(4 + 3 + 2 * MB)
        await send
        writer.close()
        server.close()
        return got

    got = asyncio.run(main())
    assert got == (2 * MB + 3).to_bytes(4, "big") + b"abc" + data[MB : 3 * MB]
    assert warmer.cold_bytes == 2 * MB
    assert warmer.cold_ranges == 1


def test_a_file_system_without_nonblocking_reads_turns_probing_off(
    tmp_path: Path, warmer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> int:
        raise OSError(95, "Operation not supported")

    path = tmp_path / "segment.log"
    written(path, MB)
    r = file_range(path, 0, MB)
    monkeypatch.setattr(os, "preadv", refuse)
    try:
        assert not warmer.cold(r)
        assert not warmer.enabled
        asyncio.run(warmer.ready([r]))  # returns at once, sends as before
        assert warmer.cold_bytes == 0
    finally:
        r.close()
