"""The shared coordinator runtime against real partition logs: appends before replies,
feedback per append, the append-failure hand-over, resolution order, pending timeouts,
timers and task shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.broker.config import BrokerConfig
from oncelog.config.typed import property_defaults
from oncelog.coordinator.runtime import (
    APPEND_RETRY_S,
    Append,
    CoordinatorRuntime,
    Pending,
    Step,
    client_error,
)
from oncelog.group.config import GroupConfig
from oncelog.storage.config import LogConfig
from oncelog.storage.replay import iter_log
from oncelog.storage.unified_log import UnifiedLog
from oncelog.txn.config import TxnConfig

E = ErrorCode
TOPIC = "__internal"
NOW = 1_700_000_000_000


class Partitions:
    """Partition 0 exists (a real log); any other index does not."""

    def __init__(self, path: Path) -> None:
        self.log = UnifiedLog.open(path / f"{TOPIC}-0", LogConfig(), now_ms=NOW)

    def partition(self, name: str, index: int) -> UnifiedLog | None:
        return self.log if (name, index) == (TOPIC, 0) else None


class Core:
    """A stand-in service: records what the runtime tells it, answers as scripted."""

    def __init__(self, partitions: Partitions) -> None:
        self.partitions = partitions
        self.events: list[object] = []
        self.on_append: dict[bytes, Step[str]] = {}  # key of an append -> its feedback step
        self.on_failure: Step[str] = Step()

    def appended(self, append: Append, now_ms: int) -> Step[str] | None:
        # The record is durable when the feedback comes.
        self.events.append(("appended", append.records[0][0], self.partitions.log.log_end_offset))
        return self.on_append.get(append.records[0][0])

    def append_failed(
        self, append: Append, error: ErrorCode, rest: Step[str], now_ms: int
    ) -> Step[str]:
        self.events.append(("failed", append.records[0][0], error, rest))
        return self.on_failure

    def perform(self, effect: object) -> None:
        self.events.append(("effect", effect))


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Partitions]:
    p = Partitions(tmp_path)
    yield p
    p.log.close()


def runtime(parts: Partitions, core: Core) -> CoordinatorRuntime[str]:
    return CoordinatorRuntime(
        name="test", topic=TOPIC, partitions=parts, feedback=core, clock=lambda: NOW
    )


def rec(key: bytes, partition: int = 0, **kw: object) -> Append:
    return Append(partition, ((key, b"v"),), **kw)  # type: ignore[arg-type]


def logged_keys(log: UnifiedLog) -> list[bytes | None]:
    return [entry.key for entry in iter_log(log)]


def test_appends_then_feedback_then_resolutions_then_effects(parts: Partitions) -> None:
    core = Core(parts)
    rt = runtime(parts, core)
    core.on_append[b"a"] = Step(appends=[rec(b"a2")], resolved=[(9, "from feedback")])

    async def scenario() -> tuple[list[tuple[int, str, int]], str]:
        done: list[tuple[int, str, int]] = []
        waiters = []
        for token in (1, 2, 9):
            task = asyncio.ensure_future(rt.call(Step(reply=Pending(token))))
            task.add_done_callback(
                lambda t, tok=token: done.append((tok, t.result(), parts.log.log_end_offset))
            )
            waiters.append(task)
        await asyncio.sleep(0)
        mine = await rt.call(
            Step("mine", [rec(b"a"), rec(b"b")], [(2, "second"), (1, "first")], ["effect"])
        )
        await asyncio.gather(*waiters)
        return done, mine

    done, mine = asyncio.run(scenario())
    assert mine == "mine"
    # The feedback of an append runs (with its own append) before the next append.
    assert logged_keys(parts.log) == [b"a", b"a2", b"b"]
    assert core.events == [
        ("appended", b"a", 1),
        ("appended", b"a2", 2),
        ("appended", b"b", 3),
        ("effect", "effect"),
    ]
    # Feedback resolutions first, then the step's own, in the step's order; all after the
    # last append.
    assert done == [(9, "from feedback", 3), (2, "second", 3), (1, "first", 3)]


def test_append_failure_hands_the_rest_of_the_step_to_the_service(parts: Partitions) -> None:
    core = Core(parts)
    rt = runtime(parts, core)
    core.on_failure = Step("failed", resolved=[(5, "x failed")])

    async def scenario() -> tuple[str, str]:
        parked = asyncio.ensure_future(rt.call(Step(reply=Pending(5))))
        await asyncio.sleep(0)
        step = Step("ok", [rec(b"a"), rec(b"lost", partition=1), rec(b"c")], [(5, "x")], ["e"])
        reply = await rt.call(step)
        return reply, await parked

    reply, parked = asyncio.run(scenario())
    assert (reply, parked) == ("failed", "x failed")
    assert logged_keys(parts.log) == [b"a"]  # nothing after the failed append
    [appended, failed] = core.events  # the step's effect was not performed
    assert appended == ("appended", b"a", 1)
    assert failed[:3] == ("failed", b"lost", E.unknown_topic_or_partition)
    rest = failed[3]
    assert isinstance(rest, Step)
    assert (rest.reply, rest.appends, rest.resolved, rest.effects) == (
        "ok",
        [rec(b"c")],
        [(5, "x")],
        ["e"],
    )


def test_storage_failure_is_reported_with_its_code(parts: Partitions) -> None:
    core = Core(parts)
    rt = runtime(parts, core)
    parts.log.close()
    core.on_failure = Step("failed")
    assert rt.run(Step("ok", [rec(b"a")])) == "failed"
    assert core.events[0][:3] == ("failed", b"a", E.kafka_storage_error)
    assert client_error(E.kafka_storage_error) is E.not_coordinator
    assert client_error(E.unknown_topic_or_partition) is E.coordinator_not_available
    assert client_error(E.record_list_too_large) is E.unknown_server_error


def test_pending_timeout_is_answered_by_cancel_or_keeps_waiting(parts: Partitions) -> None:
    core = Core(parts)
    rt = runtime(parts, core)
    cancelled: list[int] = []

    def cancel(token: int) -> str | None:
        cancelled.append(token)
        return "gave up" if token == 7 else None

    async def scenario() -> tuple[str, str]:
        gave_up = await rt.call(Step(reply=Pending(7)), timeout_s=0.05, cancel=cancel)
        rt.run(Step(resolved=[(7, "too late")]))  # dropped: nobody waits any more
        waiting = asyncio.ensure_future(
            rt.call(Step(reply=Pending(8)), timeout_s=0.05, cancel=cancel)
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()  # cancel declined: still waiting on its own append
        rt.run(Step(resolved=[(8, "answered")]))
        return gave_up, await waiting

    assert asyncio.run(scenario()) == ("gave up", "answered")
    assert cancelled == [7, 8]


def test_request_steps_must_reply(parts: Partitions) -> None:
    rt = runtime(parts, Core(parts))
    with pytest.raises(RuntimeError, match="without a reply"):
        asyncio.run(rt.call(Step()))


def test_timer_follows_the_next_deadline_and_stop_cancels_it(parts: Partitions) -> None:
    core = Core(parts)
    clock = [NOW]
    rt = CoordinatorRuntime(
        name="test", topic=TOPIC, partitions=parts, feedback=core, clock=lambda: clock[0]
    )
    ticks: list[int] = []
    deadline: list[int | None] = [None]

    def tick(now: int) -> Step[str]:
        ticks.append(now)
        deadline[0] = None
        return Step(appends=[rec(b"tick")])

    async def scenario() -> None:
        rt.start_timer(tick, max_wait_ms=60_000, next_deadline=lambda: deadline[0])
        await asyncio.sleep(0.05)
        assert ticks == []  # no deadline: it sleeps up to max_wait_ms
        deadline[0] = NOW  # due now; a call wakes the timer to re-read the deadline
        await rt.call(Step(reply="ok"))
        await asyncio.sleep(0.05)
        assert ticks == [NOW]
        await rt.stop()

    asyncio.run(scenario())
    assert logged_keys(parts.log) == [b"tick"]


def test_run_later_backs_off(parts: Partitions) -> None:
    core = Core(parts)
    rt = runtime(parts, core)

    async def scenario() -> list[bytes | None]:
        rt.run_later(0.05, lambda: Step(appends=[rec(b"retry")]))
        before = logged_keys(parts.log)
        await asyncio.sleep(0.15)
        return before

    assert asyncio.run(scenario()) == []
    assert logged_keys(parts.log) == [b"retry"]


def test_a_step_retry_is_appended_after_the_back_off(parts: Partitions) -> None:
    """A core marks an append to make again later (Step.retry): the runtime appends it
    after APPEND_RETRY_S, not at once."""
    core = Core(parts)
    rt = runtime(parts, core)

    async def scenario() -> list[bytes | None]:
        rt.run(Step(appends=[rec(b"now")], retry=[rec(b"later")]))
        at_once = logged_keys(parts.log)
        await asyncio.sleep(APPEND_RETRY_S * 3)
        return at_once

    assert asyncio.run(scenario()) == [b"now"]
    assert logged_keys(parts.log) == [b"now", b"later"]


def test_typed_config_defaults_are_the_broker_defaults() -> None:
    broker = BrokerConfig.build()
    for typed in (TxnConfig, GroupConfig):
        for key, default in property_defaults(typed).items():
            assert broker[key] == default, key
    assert property_defaults(GroupConfig)["offsets.retention.minutes"] == 10_080
    cfg = TxnConfig.from_properties(
        BrokerConfig.build(overrides={"oncelog.txn.blocking.begin": "false"}).values
    )
    assert cfg == TxnConfig(blocking_begin=False)
    assert (
        TxnConfig.from_properties({"oncelog.txn.blocking.begin": "false"}).blocking_begin is False
    )
