"""Durable acknowledgements: group commit over real partition logs, and the coordinator
runtime answering only after the fdatasync."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncelog.coordinator.runtime import CoordinatorRuntime, Pending, Step
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.unified_log import UnifiedLog

from .test_coordinator_runtime import TOPIC, Core, Partitions, rec

NOW = 1_700_000_000_000


class GatedSync:
    """An fdatasync that records its fds and waits for the test to open the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.calls: list[int] = []
        self.fail = False

    def __call__(self, fd: int) -> None:
        self.gate.wait(10)
        self.calls.append(fd)
        if self.fail:
            raise OSError(5, "Input/output error")
        os.fdatasync(fd)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[list[UnifiedLog]]:
    out = [UnifiedLog.open(tmp_path / f"t-{i}", LogConfig(), now_ms=NOW) for i in range(2)]
    yield out
    for part in out:
        part.close()


def append(part: UnifiedLog) -> int:
    batch = bytearray(build_batch([(b"k", b"v", None, NOW)]))
    return part.append(batch, parse_header(batch), now_ms=NOW).last_offset + 1


async def until(cond: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():  # type: ignore[operator]
        assert loop.time() < deadline
        await asyncio.sleep(0.005)


def test_one_round_covers_every_waiter_queued_meanwhile(logs: list[UnifiedLog]) -> None:
    fsync = GatedSync()
    sync = GroupSync(fsync)
    a, b = logs

    async def scenario() -> None:
        first = asyncio.create_task(sync.wait({a: append(a)}))
        await until(lambda: sync._runner is not None)
        await asyncio.sleep(0.05)  # the first round is inside its (gated) fdatasync
        # Three more appends wait while it runs: all go into the next round.
        rest = [asyncio.create_task(sync.wait({part: append(part)})) for part in (a, b, a)]
        await asyncio.sleep(0.05)
        assert not first.done() and not any(t.done() for t in rest)
        fsync.gate.set()
        await asyncio.gather(first, *rest)

    asyncio.run(scenario())
    assert sync.syncs == 2
    # Round 1: log a; round 2: a and b once each (three waiters, two fdatasyncs).
    assert len(fsync.calls) == 3
    assert a.durable_offset == a.log_end_offset == 3 and b.durable_offset == 1


def test_durable_data_needs_no_sync_and_a_failed_sync_withholds_the_ack(
    logs: list[UnifiedLog],
) -> None:
    fsync = GatedSync()
    fsync.gate.set()
    sync = GroupSync(fsync)
    a, _ = logs

    async def scenario() -> None:
        end = append(a)
        await sync.wait({a: end})
        await sync.wait({a: end})  # already durable: no second fdatasync
        assert len(fsync.calls) == 1
        fsync.fail = True
        end = append(a)
        with pytest.raises(OSError):
            await sync.wait({a: end})
        assert a.durable_offset == 1  # not marked durable

    asyncio.run(scenario())


def test_runtime_answers_and_performs_effects_only_after_the_fdatasync(tmp_path: Path) -> None:
    parts = Partitions(tmp_path)
    core = Core(parts)
    fsync = GatedSync()
    rt: CoordinatorRuntime[str] = CoordinatorRuntime(
        name="test",
        topic=TOPIC,
        partitions=parts,
        feedback=core,
        clock=lambda: NOW,
        durable=GroupSync(fsync),
    )
    core.on_append[b"p"] = Step(resolved=[(7, "parked-answer")], effects=["markers"])

    async def scenario() -> None:
        immediate = asyncio.create_task(rt.call(Step("now", appends=[rec(b"a")])))
        pending = asyncio.create_task(rt.call(Step(Pending(7), appends=[rec(b"p")])))
        await asyncio.sleep(0.1)
        # Both records are in the log, but nothing is answered or performed yet.
        assert parts.log.log_end_offset == 2
        assert not immediate.done() and not pending.done()
        assert ("effect", "markers") not in core.events
        fsync.gate.set()
        assert await immediate == "now"
        assert await pending == "parked-answer"
        assert ("effect", "markers") in core.events
        assert parts.log.durable_offset == 2
        await rt.stop()

    try:
        asyncio.run(scenario())
    finally:
        parts.log.close()


def test_a_log_closed_while_waiting_releases_its_waiters(logs: list[UnifiedLog]) -> None:
    fsync = GatedSync()
    sync = GroupSync(fsync)
    a, b = logs

    async def scenario() -> None:
        first = asyncio.create_task(sync.wait({a: append(a)}))
        await until(lambda: sync._runner is not None)
        await asyncio.sleep(0.05)
        second = asyncio.create_task(sync.wait({b: append(b)}))
        await asyncio.sleep(0.01)
        b.delete()  # a topic deletion while its produce waits for the fdatasync
        fsync.gate.set()
        await asyncio.wait_for(asyncio.gather(first, second), 5)

    asyncio.run(scenario())
    assert sync.syncs == 2 and len(fsync.calls) == 1
