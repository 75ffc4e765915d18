"""The async shell around the sans-IO GroupCoordinator.

Calls are serialized by construction: each coordinator call runs to completion
(its records appended to ``__consumer_offsets``) before the event loop runs
anything else, which is the ordering the coordinator's step protocol needs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.clock import now_ms
from oncelog.group.config import GroupConfig
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.messages import Pending, Step
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.replay import iter_log
from oncelog.txn.actions import CONSUMER_OFFSETS_TOPIC

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)
INTERNAL_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
TICK_MAX_S = 0.5


class GroupService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = GroupConfig.from_properties(broker.config.values)
        self.coordinator = GroupCoordinator(self.config)
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._wakeup = asyncio.Event()

    def start(self) -> None:
        started = time.monotonic()
        topic = self.broker.ensure_internal_topic(
            CONSUMER_OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, INTERNAL_TOPIC_CONFIG
        )
        records = 0
        for index, part in enumerate(topic.partitions):
            for entry in iter_log(part):
                if entry.marker_commit is not None:
                    self.coordinator.load_marker(entry.producer_id, entry.marker_commit, index)
                elif entry.key is not None:
                    pid = entry.producer_id if entry.transactional else -1
                    self.coordinator.load([(entry.key, entry.value)], pid)
                    records += 1
        self.coordinator.finish_load(now_ms())
        log.info("loaded %d groups from %d records in %.3fs", len(self.coordinator.groups()), records, time.monotonic() - started)

    def on_offsets_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached a __consumer_offsets partition."""
        self.coordinator.complete_txn(producer_id, commit, partition)

    async def call(self, step: Step) -> Any:
        """Append the step's records, then release its replies; wait if parked."""
        fut: asyncio.Future[Any] | None = None
        if isinstance(step.reply, Pending):
            fut = asyncio.get_running_loop().create_future()
            self._futures[step.reply.token] = fut
        reply = self.run(step)
        self._wakeup.set()  # deadlines may have moved
        if fut is None:
            return reply
        return await fut

    def run(self, step: Step) -> Any:
        """Perform appends, then resolve parked requests; returns the immediate reply."""
        error = self._append_all(step)
        if error is not None:
            for token, reply in step.failed(error):
                if token is not None:
                    self._resolve(token, reply)
            for token, reply in self.coordinator.abandon(error):
                self._resolve(token, reply)
            self.coordinator = GroupCoordinator(self.config)
            self.start()  # rebuild from what the log really holds, as Kafka reloads a partition
            failed = [r for t, r in step.failed(error) if t is None]
            return failed[0] if failed else None
        for token, reply in step.resolved:
            self._resolve(token, reply)
        return None if isinstance(step.reply, Pending) else step.reply

    def _resolve(self, token: int, reply: Any) -> None:
        fut = self._futures.pop(token, None)
        if fut is not None and not fut.done():
            fut.set_result(reply)

    def _append_all(self, step: Step) -> ErrorCode | None:
        now = now_ms()
        for append in step.appends:
            part = self.broker.topics.partition(CONSUMER_OFFSETS_TOPIC, append.partition)
            if part is None:
                return ErrorCode.not_coordinator
            batch = bytearray(
                build_batch(
                    [(k, v, None, now) for k, v in append.records],
                    producer_id=append.producer_id,
                    producer_epoch=append.producer_epoch,
                    transactional=append.producer_id >= 0,
                )
            )
            try:
                part.append(batch, parse_header(batch), now_ms=now, coordinator=True)
            except OSError:
                log.exception("cannot append to %s-%d", CONSUMER_OFFSETS_TOPIC, append.partition)
                return ErrorCode.not_coordinator
        return None

    async def tick_forever(self) -> None:
        while True:
            deadline = self.coordinator.next_deadline()
            wait = TICK_MAX_S if deadline is None else max(0.0, min(TICK_MAX_S, (deadline - now_ms()) / 1000))
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), wait)
            except TimeoutError:
                pass
            try:
                self.run(self.coordinator.tick(now_ms()))
            except Exception:
                log.exception("group coordinator tick failed")
