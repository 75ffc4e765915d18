"""TurnScheduler: backlogged connections take turns round-robin, in slices, and a fresh
request never waits behind every backlog."""

from __future__ import annotations

import asyncio
import time

from oncelog.broker.turns import TurnScheduler


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_backlogged_connections_take_turns_round_robin() -> None:
    order: list[str] = []

    async def main() -> None:
        turns = TurnScheduler()

        async def backlog(name: str) -> None:
            for _ in range(4):
                await turns.turn()
                order.append(name)

        await asyncio.gather(backlog("a"), backlog("b"), backlog("c"))
        assert turns.waiting == 0

    asyncio.run(main())
    assert order == list("abc" * 4)


def test_a_fresh_request_waits_for_about_one_slice_of_fifty_backlogs() -> None:
    """50 connections with 0.5 ms requests queued: plain yielding (one request of each
    per loop iteration) makes a fresh request wait behind up to 50 of them; with turns
    it waits behind one slice's batch (2 ms / 0.5 ms = 4 turns)."""
    served = [0]
    waited: list[int] = []

    async def main() -> None:
        turns = TurnScheduler(slice_s=0.002)
        done = asyncio.Event()

        async def backlog() -> None:
            while not done.is_set():
                await turns.turn()
                _busy(0.000_5)
                served[0] += 1

        async def fresh() -> None:
            loop = asyncio.get_running_loop()
            for i in range(20):
                arrived = loop.create_future()
                at_arrival = [0]

                def arrive(
                    fut: asyncio.Future[None] = arrived, mark: list[int] = at_arrival
                ) -> None:
                    mark[0] = served[0]  # the request's bytes are seen by the loop here
                    fut.set_result(None)

                # The first arrival waits for the cost estimate to settle: it starts at
                # 0.2 ms a request, so the first batches are 2.5x too long (10 turns).
                loop.call_later(0.05 if i == 0 else 0.01, arrive)
                await arrived
                waited.append(served[0] - at_arrival[0])
            done.set()

        await asyncio.gather(fresh(), *(backlog() for _ in range(50)))

    asyncio.run(main())
    # one batch may run between the arrival and the fresh request (plus one turn of
    # slack for the cost estimate), never a round of all 50
    assert max(waited) <= 8, waited
    assert served[0] > 100  # the backlogs were served meanwhile
