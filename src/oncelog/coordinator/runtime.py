"""The one asyncio shell that drives a sans-IO coordinator core (transactions, groups).

A pure core answers every call with a ``Step``: the caller's ``reply`` (or ``Pending``
when the answer comes later), records to ``append`` to the core's internal topic,
``resolved`` replies for earlier ``Pending`` tokens, and other ``effects`` (e.g. writing
transaction markers) that only the owning service knows how to perform. The idea is Kafka's
coordinator-common (``CoordinatorRuntime`` running ``CoordinatorResult``s); the code is ours.

``CoordinatorRuntime.run(step)``:

1. appends ``step.appends`` in order, each as one batch, durably. After each, it tells the
   service (``Feedback.appended``) and runs the step that comes back (the transaction core
   learns that its record is durable this way) before the next append;
2. if an append fails, the rest of the step (remaining appends, its replies and effects) is
   handed to ``Feedback.append_failed``, and the step that returns runs instead: the service
   decides what survives (the transaction core maps the error into the replies; the group
   service fails the step's replies and reloads its core from the log);
3. only once every append is done, resolves ``step.resolved`` in order, then performs
   ``step.effects`` in order, and returns ``step.reply``: no reply leaves before the
   records it depends on are in the log. With durable acknowledgements (a ``GroupSync``,
   ``oncelog.flush.on.ack``) resolving and effects wait, in a task, until an fdatasync
   has made every record appended so far durable, and ``call`` waits likewise before it
   returns an immediate reply: no answer and no marker precede the fsync.

Loading is the runtime's too: ``loader`` (``coordinator.loader.PartitionLoader``) replays
each partition of the topic into a fresh core in the background, as Kafka's runtime loads
its shards, and the service only says how a batch is replayed (its ``Playback``).

``call(step)`` does the same for a request and waits for a ``Pending`` reply, optionally
bounded (``timeout_s``; the service's ``cancel`` then answers, or declines if the request
is already waiting on its own append). ``run_timer`` drives a core's timers; ``spawn``
tracks background tasks (marker writing), and ``stop`` cancels them.

All of it runs on the event loop thread; ``run`` never awaits, so one step is fully
applied before anything else touches the core, which is the serialization the cores need.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from oncelog.clock import Clock
from oncelog.coordinator.internal_topics import CoordinatorLog, PartitionLookup
from oncelog.coordinator.loader import PartitionLoader, Playback
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.errors import LogError
from oncelog.storage.group_sync import GroupSync

log = logging.getLogger(__name__)

R = TypeVar("R")
# The back-off before a ``Step.retry`` append is made again.
APPEND_RETRY_S = 0.1
# What a core asks its shell to do besides appending (the transaction core: write markers;
# the group core: resolve a group's subscribed regexes).
E = TypeVar("E")
NO_PRODUCER = -1


@dataclass(frozen=True, slots=True)
class Append:
    """Records to append, as one batch, to partition ``partition`` of the core's topic.

    ``producer_id`` != -1 makes it a transactional batch of that producer/epoch (a
    TxnOffsetCommit: the transaction's marker decides whether it counts). ``owner`` names
    the core object waiting for the outcome (a transactional id); ``label`` says what the
    records mean, for logs and tests."""

    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = NO_PRODUCER
    producer_epoch: int = -1
    owner: str = ""
    label: object = None


class NoEffect:
    """The effect type of a core that asks for none (no instance is ever made)."""

    def __init__(self) -> None:
        raise TypeError("NoEffect has no instances")


@dataclass(frozen=True, slots=True)
class Pending:
    """The reply arrives later, in some ``Step.resolved`` entry for ``token``."""

    token: int


@dataclass(slots=True)
class Step(Generic[R, E]):
    """The outcome of one call into a core; see the module docstring."""

    reply: R | Pending | None = None
    appends: list[Append] = field(default_factory=list)
    resolved: list[tuple[int, R]] = field(default_factory=list)
    effects: list[E] = field(default_factory=list)
    # Appends to make again after ``APPEND_RETRY_S`` (a record whose outcome is decided,
    # e.g. a transaction's completion, whose append failed).
    retry: list[Append] = field(default_factory=list)

    def merge(self, other: Step[R, E]) -> Step[R, E]:
        """This step followed by ``other``'s appends, replies, effects and retries (its
        immediate reply is not kept: a failure path answers through ``resolved``)."""
        self.appends.extend(other.appends)
        self.resolved.extend(other.resolved)
        self.effects.extend(other.effects)
        self.retry.extend(other.retry)
        return self


def client_error(append_error: ErrorCode) -> ErrorCode:
    """The error a client sees when its coordinator's append failed (Kafka's mapping)."""
    if append_error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if append_error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if append_error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return append_error


class Feedback(Protocol[R, E]):
    """What a service tells the runtime about its core (see ``CoordinatorRuntime.run``)."""

    def appended(self, append: Append, now_ms: int) -> Step[R, E] | None: ...

    def append_failed(
        self, append: Append, error: ErrorCode, rest: Step[R, E], now_ms: int
    ) -> Step[R, E]: ...

    def perform(self, effect: E) -> None: ...


class CoordinatorRuntime(Generic[R, E]):
    def __init__(
        self,
        *,
        name: str,
        topic: str,
        partitions: PartitionLookup,
        feedback: Feedback[R, E],
        clock: Clock,
        durable: GroupSync | None = None,
        playback: Playback | None = None,
        served: str = "records",
    ) -> None:
        """``playback``: how the service replays its partitions, for ``loader``;
        ``served``: what a partition's requests are about, for the loader's log lines."""
        self.name = name
        self.topic = topic
        self._partitions = partitions
        self._feedback = feedback
        self._clock = clock
        self._futures: dict[int, asyncio.Future[R]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wakeup: asyncio.Event | None = None
        self._stopping = False
        self._durable = durable
        # Logs appended to and not yet known durable: log -> end offset written.
        self._unsynced: dict[CoordinatorLog, int] = {}
        self._loader = (
            None
            if playback is None
            else PartitionLoader(topic=topic, served=served, playback=playback, spawn=self.spawn)
        )

    @property
    def loader(self) -> PartitionLoader:
        """Loads the topic's partitions into the service's cores."""
        if self._loader is None:
            raise RuntimeError(f"{self.name}: no playback given, nothing to load")
        return self._loader

    # -- steps ---------------------------------------------------------------------------

    def run(self, step: Step[R, E]) -> R | Pending | None:
        """Perform ``step``; returns its immediate reply (after any append failure, the
        reply of the step that replaced it)."""
        if step.retry:
            retry = step.retry
            self.run_later(APPEND_RETRY_S, lambda: Step(appends=retry))
        appends = step.appends
        for i, append in enumerate(appends):
            now = self._clock()
            error = self._append(append, now)
            if error is not ErrorCode.none:
                rest = Step(step.reply, appends[i + 1 :], step.resolved, step.effects)
                return self.run(self._feedback.append_failed(append, error, rest, now))
            feedback = self._feedback.appended(append, now)
            if feedback is not None:
                self.run(feedback)
        if self._durable is not None and self._unsynced:
            if step.resolved or step.effects:
                self.spawn(self._settle_when_durable(step.resolved, step.effects))
            return step.reply
        self._settle(step.resolved, step.effects)
        return step.reply

    def _settle(self, resolved: list[tuple[int, R]], effects: list[E]) -> None:
        for token, reply in resolved:
            self._resolve(token, reply)
        for effect in effects:
            self._feedback.perform(effect)

    async def _settle_when_durable(self, resolved: list[tuple[int, R]], effects: list[E]) -> None:
        await self._until_durable()
        self._settle(resolved, effects)

    async def _until_durable(self) -> None:
        """Wait until everything appended so far is fsynced (durable acknowledgements)."""
        if self._durable is None or not self._unsynced:
            return
        try:
            await self._durable.wait(dict(self._unsynced))
        except OSError:
            # Kafka would take the log directory offline; we answer and say so loudly.
            log.exception("%s: fdatasync of %s failed", self.name, self.topic)
        self._unsynced = {p: e for p, e in self._unsynced.items() if p.durable_offset < e}

    async def call(
        self,
        step: Step[R, E],
        *,
        timeout_s: float | None = None,
        cancel: Callable[[int], R | None] | None = None,
    ) -> R:
        """Run a request's step and return its reply, waiting if it is ``Pending``. After
        ``timeout_s``, ``cancel(token)`` may answer instead (``None``: keep waiting)."""
        fut: asyncio.Future[R] | None = None
        if isinstance(step.reply, Pending):
            # Registered before running: the step may resolve its own token.
            fut = asyncio.get_running_loop().create_future()
            self._futures[step.reply.token] = fut
        reply = self.run(step)
        if self._wakeup is not None:
            self._wakeup.set()  # deadlines may have moved
        if not isinstance(reply, Pending):
            if isinstance(step.reply, Pending):
                self._futures.pop(step.reply.token, None)
            if reply is None:
                raise RuntimeError(f"{self.name}: a request step without a reply")
            await self._until_durable()
            return reply
        assert fut is not None
        if timeout_s is None or cancel is None:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            answer = cancel(reply.token)
            if answer is None:
                return await fut  # waiting on its own append: that will answer
            self._futures.pop(reply.token, None)
            return answer

    def append_unowned(self, append: Append) -> ErrorCode:
        """Append records no core is waiting for (start-up housekeeping, such as rewriting
        records of an older layout): no feedback to the core."""
        return self._append(append, self._clock())

    def _resolve(self, token: int, reply: R) -> None:
        # A token nobody waits for any more (e.g. after a disconnect) is dropped.
        fut = self._futures.pop(token, None)
        if fut is not None and not fut.done():
            fut.set_result(reply)

    def _append(self, append: Append, now: int) -> ErrorCode:
        part = self._partitions.partition(self.topic, append.partition)
        if part is None:
            return ErrorCode.unknown_topic_or_partition
        batch = bytearray(
            build_batch(
                [(key, value, None, now) for key, value in append.records],
                producer_id=append.producer_id,
                producer_epoch=append.producer_epoch,
                transactional=append.producer_id != NO_PRODUCER,
            )
        )
        try:
            result = part.append(batch, parse_header(batch), now_ms=now, coordinator=True)
        except OSError:
            log.exception("cannot append to %s-%d", self.topic, append.partition)
            return ErrorCode.kafka_storage_error
        except LogError as exc:
            log.error("cannot append to %s-%d: %s", self.topic, append.partition, exc)
            return exc.error_code
        if self._durable is not None:
            self._unsynced[part] = result.last_offset + 1
        return ErrorCode.none

    # -- timers and tasks ----------------------------------------------------------------

    def run_later(self, delay_s: float, step: Callable[[], Step[R, E]]) -> None:
        """Run ``step()`` after ``delay_s`` (a back-off after a failed append)."""

        async def later() -> None:
            await asyncio.sleep(delay_s)
            self.run(step())

        self.spawn(later())

    def start_timer(
        self,
        tick: Callable[[int], Step[R, E]],
        *,
        max_wait_ms: int,
        next_deadline: Callable[[], int | None] | None = None,
    ) -> None:
        """Run ``tick(now_ms)`` every ``max_wait_ms``, or sooner when ``next_deadline()``
        (re-read after every ``call``) comes first."""
        if next_deadline is not None:
            self._wakeup = asyncio.Event()
        self.spawn(self._timer(tick, max_wait_ms, next_deadline))

    async def _timer(
        self,
        tick: Callable[[int], Step[R, E]],
        max_wait_ms: int,
        next_deadline: Callable[[], int | None] | None,
    ) -> None:
        while not self._stopping:
            wait_ms = max_wait_ms
            deadline = None if next_deadline is None else next_deadline()
            if deadline is not None:
                wait_ms = max(0, min(max_wait_ms, deadline - self._clock()))
            if self._wakeup is None:
                await asyncio.sleep(wait_ms / 1000)
            else:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), wait_ms / 1000)
                except TimeoutError:
                    pass
            try:
                self.run(tick(self._clock()))
            except Exception:
                log.exception("%s timer failed", self.name)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        # Also checked by the timer: Python 3.11's wait_for can swallow a cancellation that
        # arrives as its wakeup event is set, and the timer would then run on.
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
