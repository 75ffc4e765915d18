"""Loading a coordinator's internal-topic partitions, owned by the runtime for every core.

Kafka's ``CoordinatorRuntime`` keeps one shard per partition of a coordinator's topic, in
a state (LOADING, ACTIVE, FAILED), and its ``CoordinatorLoaderImpl`` replays a partition
into a fresh shard while the broker serves. ``PartitionLoader`` does the same for a
service on the event loop:

- ``start(parts, background=True)`` loads every partition, one after another, in slices
  of at most ``LOAD_SLICE_S`` of work. The service's core answers a loading partition's
  requests COORDINATOR_LOAD_IN_PROGRESS; the partitions already loaded are served.
- A request may wait for its partition instead (``until_loaded``, at most the service's
  load wait): that partition loads next. librdkafka fails a synchronous commit after two
  quick retries of COORDINATOR_LOAD_IN_PROGRESS, so a consumer committing just after a
  restart would otherwise fail and reprocess.
- A failed load makes the partition FAILED (the core answers NOT_COORDINATOR, waiting
  requests are woken to get it). On one node no other broker would be elected, so it is
  loaded again after a back-off (1 s, doubling, at most 30 s).
- ``reload(partitions)`` rebuilds partitions whose core got ahead of its log (a failed
  append), as Kafka reloads a failed shard.

What is appended to a partition while its load yields (transaction markers: its unloaded
core ignores them) is read by a last pass that does not yield, so the core takes over
exactly where the log ends: no record is missed or applied twice.

The service provides only the replay (``Playback``): a replayer per partition load, and
what a partition's state change means for its core.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, Protocol

from oncelog import hooks
from oncelog.coordinator.internal_topics import CoordinatorLog
from oncelog.storage.replay import LogBatch

log = logging.getLogger(__name__)

LOAD_SLICE_S = 0.005  # a background load gives the event loop back after this much work
LOAD_RETRY_MIN_S, LOAD_RETRY_MAX_S = 1.0, 30.0


class PartitionReplay(Protocol):
    """One load of one partition into a fresh core."""

    def replay(self, batch: LogBatch) -> None: ...

    def complete(self) -> None:
        """The log is replayed to its end: the new core takes the partition over."""
        ...


class Playback(Protocol):
    """What a service tells the loader (Kafka's ``CoordinatorShard`` replay side)."""

    def begin_load(self, partition: int) -> PartitionReplay: ...

    def mark_loading(self, partition: int) -> None:
        """``partition`` loads again: its requests get COORDINATOR_LOAD_IN_PROGRESS."""
        ...

    def mark_failed(self, partition: int) -> None:
        """The load of ``partition`` failed: its requests get NOT_COORDINATOR."""
        ...

    def all_loaded(self) -> None:
        """Every partition is loaded (after the start-up load, or a reload)."""
        ...


class PartitionLoader:
    def __init__(
        self,
        *,
        topic: str,
        served: str,
        playback: Playback,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        """``served``: what a partition's requests are about, for the log ("groups")."""
        self.topic = topic
        self._served = served
        self._playback = playback
        self._spawn = spawn
        self.load_time_s = 0.0  # how long the load under way or last done took
        self._parts: Sequence[CoordinatorLog] = ()
        self._pending: set[int] = set()  # not loaded yet: loading or failed
        self._failed: set[int] = set()
        self._replayed: dict[int, int] = {}  # records replayed by each partition's last load
        self._total = 0  # offsets to replay
        self._started = 0.0
        self._queue: deque[int] = deque()
        self._running = False
        self._failed_attempts: dict[int, int] = {}
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}

    # -- state ---------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Every partition is loaded."""
        return not self._pending

    def is_loaded(self, partition: int) -> bool:
        return partition not in self._pending

    @property
    def progress(self) -> tuple[int, int]:
        """(records replayed, offsets to replay) of the load under way or last done."""
        return sum(self._replayed.values()), self._total

    # -- loading -------------------------------------------------------------------------

    def start(self, parts: Sequence[CoordinatorLog], *, background: bool) -> None:
        """Load every partition of ``parts``: in the background, or here to the end (a
        failure then raises)."""
        self._begin(parts)
        if background:
            self._enqueue(range(len(parts)))
            return
        for index in range(len(parts)):
            for _ in self._load_steps(index):
                pass
        self._all_loaded()

    def _begin(self, parts: Sequence[CoordinatorLog]) -> None:
        """Every partition of ``parts`` is to load."""
        self._parts = parts
        self._started = time.monotonic()
        self._total = sum(_size(p) for p in parts)
        self._replayed = {}
        self._pending = set(range(len(parts)))
        self._failed = set()

    def reload(self, partitions: Sequence[int], parts: Sequence[CoordinatorLog]) -> None:
        """Rebuild the cores of ``partitions`` from their logs: in the background when the
        event loop runs (their requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile), else
        at once."""
        self._parts = parts
        # The progress and time count these partitions' replay again, at their size now.
        self._started = time.monotonic()
        self._total += sum(_size(parts[i]) - self._replayed.get(i, 0) for i in partitions)
        for index in partitions:
            self._pending.add(index)
            self._playback.mark_loading(index)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            for index in partitions:
                for _ in self._load_steps(index):
                    pass
            return
        self._enqueue(partitions)

    def _load_steps(self, index: int) -> Iterator[None]:
        """Replay partition ``index`` into a new core, yielding after each batch, then hand
        it the partition (see the module docstring for the last pass)."""
        part = self._parts[index]
        replay = self._playback.begin_load(index)
        self._replayed[index] = 0
        end = part.high_watermark
        for batch in part.read_batches(part.log_start_offset, end):
            self._replay(replay, index, batch)
            yield
        for batch in part.read_batches(end):  # what came in meanwhile, without yielding
            self._replay(replay, index, batch)
        replay.complete()
        self._pending.discard(index)
        self._wake(index)

    def _replay(self, replay: PartitionReplay, index: int, batch: LogBatch) -> None:
        replay.replay(batch)
        if batch.marker_commit is None:
            self._replayed[index] += len(batch.records)

    def _enqueue(self, partitions: Iterable[int]) -> None:
        """Queue ``partitions`` for the one background loader."""
        self._queue.extend(p for p in partitions if p not in self._queue)
        if not self._running:
            self._running = True
            self._spawn(self._run())

    async def _run(self) -> None:
        try:
            while self._queue:
                await self._load_in_background(self._queue.popleft())
        finally:
            self._running = False
        if not self._queue and not self._pending:
            self._all_loaded()

    async def _load_in_background(self, index: int) -> None:
        try:
            # A test hook may hold the load back, or fail it.
            await hooks.apoint("coordinator.load", topic=self.topic, partition=index)
            deadline = time.monotonic() + LOAD_SLICE_S
            for _ in self._load_steps(index):
                if time.monotonic() >= deadline:
                    await asyncio.sleep(0)  # let the other clients in
                    deadline = time.monotonic() + LOAD_SLICE_S
        except Exception as exc:
            self._load_failed(index, exc)
            return
        attempts = self._failed_attempts.pop(index, 0)
        if attempts:
            log.info(
                "loaded %s-%d after %d failed attempts; its %s are served",
                self.topic,
                index,
                attempts,
                self._served,
            )

    def _load_failed(self, index: int, exc: Exception) -> None:
        """Kafka marks the partition FAILED until it is elected again; on one node nothing
        would elect it, so it is loaded again after a back-off. Meanwhile its clients look
        for their coordinator again (FindCoordinator) and retry."""
        attempts = self._failed_attempts[index] = self._failed_attempts.get(index, 0) + 1
        delay = min(LOAD_RETRY_MIN_S * 2 ** min(attempts - 1, 16), LOAD_RETRY_MAX_S)
        self._failed.add(index)
        self._playback.mark_failed(index)
        self._wake(index)  # they get NOT_COORDINATOR and look again
        log.error(
            "loading %s-%d failed (attempt %d): %s; its %s answer NOT_COORDINATOR, "
            "loading it again in %.3gs",
            self.topic,
            index,
            attempts,
            exc,
            self._served,
            delay,
            exc_info=exc,
        )
        self._spawn(self._retry(index, delay))

    async def _retry(self, index: int, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._failed.discard(index)
        self._playback.mark_loading(index)  # COORDINATOR_LOAD_IN_PROGRESS again
        self._enqueue([index])

    def _all_loaded(self) -> None:
        self.load_time_s = time.monotonic() - self._started
        self._playback.all_loaded()

    # -- requests waiting for a load -------------------------------------------------------

    async def until_loaded(self, partition: int, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for ``partition`` to be loaded, loading it next;
        returns at once if it is loaded or its load failed."""
        if timeout_s <= 0 or partition not in self._pending or partition in self._failed:
            return
        if partition in self._queue:  # not being loaded yet: it goes first
            self._queue.remove(partition)
            self._queue.appendleft(partition)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(partition, [])
        waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass  # still loading: the core answers COORDINATOR_LOAD_IN_PROGRESS
        finally:
            if waiter in waiters:
                waiters.remove(waiter)

    def _wake(self, partition: int) -> None:
        for waiter in self._waiters.pop(partition, []):
            if not waiter.done():
                waiter.set_result(None)


def _size(part: CoordinatorLog) -> int:
    return max(0, part.high_watermark - part.log_start_offset)
