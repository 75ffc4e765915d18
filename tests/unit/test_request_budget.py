"""The broker-wide request budget mutes a connection only while it holds queued frames."""

from __future__ import annotations

import asyncio

from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.framing import encode_frame
from oncelog.protocol.request_budget import RequestBudget


class FakeTransport:
    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False


def feed(protocol: FrameProtocol, data: bytes) -> None:
    view = memoryview(data)
    while view:
        buf = protocol.get_buffer(-1)
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        protocol.buffer_updated(n)
        view = view[n:]


def make(budget: RequestBudget) -> tuple[FrameProtocol, FakeTransport]:
    protocol = FrameProtocol(1 << 20, lambda p: None, budget=budget)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def test_a_spent_budget_mutes_connections_with_queued_frames_until_they_are_served() -> None:
    async def run() -> None:
        budget = RequestBudget(max_requests=3, max_bytes=-1)
        a, ta = make(budget)
        b, tb = make(budget)
        feed(a, encode_frame(b"1") + encode_frame(b"2"))
        assert budget.requests == 2 and budget.bytes == 2 and ta.reading
        feed(b, encode_frame(b"3"))
        assert budget.spent and not tb.reading  # b holds a frame while the budget is spent
        assert await b.next_frame() == b"3"
        assert tb.reading  # served its own queue: reads again, whatever the others hold
        assert budget.requests == 2
        assert await a.next_frame() == b"1"
        a.release()  # closed with one frame unserved: it goes back to the budget
        assert budget.requests == 0 and budget.bytes == 0

    asyncio.run(run())


def test_the_byte_budget_counts_frame_sizes() -> None:
    budget = RequestBudget(max_requests=500, max_bytes=100)
    assert not budget.spent
    budget.take(1, 100)
    assert budget.spent
    budget.give(1, 100)
    assert not budget.spent


def test_partial_frames_count_and_one_connection_at_a_time_may_overdraw() -> None:
    """queued.max.request.bytes bounds the buffers of frames still arriving: past the
    bound only one connection (the overdraft) may grow its buffer, so its frame
    completes; the others stop reading until memory comes back."""
    mib = 1 << 20

    async def run() -> None:
        budget = RequestBudget(max_requests=500, max_bytes=mib + mib // 2)
        a, ta = make_sized(budget, 8 * mib)
        b, tb = make_sized(budget, 8 * mib)
        frame_a = encode_frame(b"a" * (4 * mib))
        feed(a, frame_a[: 2 * mib])  # 1 MiB buffer, then grown to 2 MiB: A overdraws
        assert budget.overdraft is a and budget.bytes == 2 * mib and ta.reading
        waiting = 64 * 1024 + 100
        feed(b, encode_frame(b"b" * (4 * mib))[:waiting])  # B's first 1 MiB: refused
        # its bytes wait in the rolling buffer, charged as they are
        assert b.parser.starved and not tb.reading and budget.bytes == 2 * mib + waiting
        feed(a, frame_a[2 * mib :])  # A's frame completes within its overdraft
        assert budget.bytes == 4 * mib + waiting and budget.requests == 1
        assert await a.next_frame() == b"a" * (4 * mib)
        # served: the memory and the overdraft come back, and B reads again
        assert budget.overdraft is None and not b.parser.starved and tb.reading
        assert budget.bytes == mib  # B's first buffer
        b.release()
        a.release()
        assert budget.bytes == 0 and budget.requests == 0

    asyncio.run(run())


def make_sized(budget: RequestBudget, max_size: int) -> tuple[FrameProtocol, FakeTransport]:
    protocol = FrameProtocol(max_size, lambda p: None, budget=budget)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def test_a_small_frame_still_arriving_is_charged_as_its_bytes_come() -> None:
    """Bytes of a frame below the large-frame size wait in the rolling buffer: they are
    request bytes held too (queued.max.request.bytes), until the frame is served."""

    async def run() -> None:
        budget = RequestBudget(max_requests=500, max_bytes=1000)
        a, ta = make(budget)
        b, tb = make(budget)
        frame = encode_frame(b"x" * 996)  # 1000 bytes with its size prefix
        feed(a, frame[:600])
        assert budget.bytes == 600 and budget.requests == 0 and ta.reading
        feed(a, frame[600:])  # cut: the frame's 996 bytes, no partial bytes left
        assert budget.bytes == 996 and budget.requests == 1
        feed(b, encode_frame(b"y") + encode_frame(b"z" * 10)[:5])
        # b holds a queued frame while the budget is spent: muted until it serves it
        assert budget.bytes == 996 + 1 + 5 and budget.spent and not tb.reading
        assert await b.next_frame() == b"y"
        assert tb.reading and budget.bytes == 996 + 5
        assert await a.next_frame() == b"x" * 996
        assert budget.bytes == 5
        b.release()  # closed inside a frame: its partial bytes come back
        assert budget.bytes == 0 and budget.requests == 0

    asyncio.run(run())
