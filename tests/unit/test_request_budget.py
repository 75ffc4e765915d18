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
