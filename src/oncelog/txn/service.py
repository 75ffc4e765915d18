"""The async shell around the sans-IO TransactionCoordinator.

It performs the coordinator's actions against local storage: appends to
``__transaction_state`` and end-txn markers to partitions. Marker writing is
scheduled on the event loop after the EndTxn response, as a real marker
writer would be asynchronous; seed 003's blocking begin then matters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.clock import now_ms
from oncelog.records.batch import parse_header
from oncelog.records.builder import build_batch
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.log import PartitionLog
from oncelog.storage.replay import iter_log
from oncelog.txn.actions import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    AppendTxnLog,
    Pending,
    Reply,
    Step,
    WriteMarkers,
)
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.markers import write_marker
from oncelog.txn.metadata import TopicPartition, TxnState

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)

INTERNAL_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
# Called after a marker reaches a __consumer_offsets partition: (partition, pid, commit).
OffsetsMarkerHook = Callable[[int, int, bool], None]


def next_coordinator_epoch(path: Path) -> int:
    """A coordinator epoch that grows across restarts, so partitions fence markers
    from an older incarnation."""
    epoch = 0
    if path.exists():
        epoch = int(json.loads(path.read_text())["coordinator_epoch"]) + 1
    atomic_write(path, json.dumps({"coordinator_epoch": epoch}).encode())
    return epoch


class TransactionService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg.get_int("transaction.state.log.num.partitions")
        self.blocking_max_wait_s = cfg.get_int("oncelog.txn.blocking.begin.max.wait.ms") / 1000
        self.coordinator = TransactionCoordinator(
            allocate_producer_id=broker.producer_ids.allocate,
            max_timeout_ms=cfg.get_int("transaction.max.timeout.ms"),
            id_expiration_ms=cfg.get_int("transactional.id.expiration.ms"),
            coordinator_epoch=0,
            blocking_begin=cfg.get_bool("oncelog.txn.blocking.begin"),
            txn_log_partitions=self.num_partitions,
            offsets_partitions=cfg.get_int("offsets.topic.num.partitions"),
        )
        self.offsets_marker_hook: OffsetsMarkerHook | None = None
        self._futures: dict[int, asyncio.Future[Reply]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.loaded = False

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Create/load ``__transaction_state`` and finish prepared transactions."""
        broker = self.broker
        self.coordinator.coordinator_epoch = next_coordinator_epoch(
            broker.data_dir / "meta" / "coordinator_epoch.json"
        )
        topic = broker.ensure_internal_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, INTERNAL_TOPIC_CONFIG)
        started = time.monotonic()
        records: list[tuple[bytes, bytes | None]] = []
        for part in topic.partitions:
            for entry in iter_log(part):
                if entry.key is not None and entry.marker_commit is None:
                    records.append((entry.key, entry.value))
        self.run(self.coordinator.load(records, now_ms=now_ms()))
        self.loaded = True
        log.info(
            "loaded %d transactional ids from %d records in %.3fs",
            self.coordinator.num_transactional_ids, len(records), time.monotonic() - started,
        )

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def expire_forever(self) -> None:
        interval = self.broker.config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.run(self.coordinator.expire(now_ms()))
            except Exception:
                log.exception("transaction expiration failed")

    # -- requests ------------------------------------------------------------------
    async def call(self, step: Step) -> Reply:
        """Run a request's step and wait for its reply."""
        reply = step.reply
        fut: asyncio.Future[Reply] | None = None
        if isinstance(reply, Pending):
            fut = asyncio.get_running_loop().create_future()
            self._futures[reply.token] = fut
        self.run(step)
        if fut is None:
            assert isinstance(reply, Reply)
            return reply
        assert isinstance(reply, Pending)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.blocking_max_wait_s)
        except TimeoutError:
            cancelled = self.coordinator.cancel(reply.token)
            if cancelled is not None:
                self._futures.pop(reply.token, None)
                return cancelled
            return await fut  # waiting on our own log append: it will answer

    def run(self, step: Step) -> None:
        for token, reply in step.resolved.items():
            fut = self._futures.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(reply)
        for action in step.actions:
            if isinstance(action, AppendTxnLog):
                self.run(self._append(action))
            elif isinstance(action, WriteMarkers):
                self._spawn(self._write_markers(action))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- actions -------------------------------------------------------------------
    def _append(self, action: AppendTxnLog) -> Step:
        now = now_ms()
        part = self.broker.topics.partition(TRANSACTION_STATE_TOPIC, action.partition)
        error = ErrorCode.none
        if part is None:
            error = ErrorCode.unknown_topic_or_partition
        else:
            batch = bytearray(build_batch([(action.key, action.value, None, now)]))
            try:
                part.append(batch, parse_header(batch), now_ms=now)
            except OSError:
                log.exception("cannot append to %s-%d", TRANSACTION_STATE_TOPIC, action.partition)
                error = ErrorCode.kafka_storage_error
        return self.coordinator.on_log_appended(action.transactional_id, now_ms=now, error=error)

    async def _write_markers(self, action: WriteMarkers) -> None:
        # Let the EndTxn response go out first, like a remote marker writer.
        await asyncio.sleep(self.broker.config.get_int("oncelog.debug.marker.delay.ms") / 1000)
        now = now_ms()
        for topic, index in sorted(action.partitions):
            part = self.broker.topics.partition(topic, index)
            if part is None:
                continue  # the topic was deleted: nothing to mark
            code = await self._write_marker_retrying(part, action, now)
            if code == ErrorCode.none:
                self.broker.notifier.notify((topic, index))
                if topic == CONSUMER_OFFSETS_TOPIC and self.offsets_marker_hook is not None:
                    self.offsets_marker_hook(index, action.producer_id, action.commit)
        self.run(self.coordinator.on_markers_written(action.transactional_id, now_ms=now_ms()))

    async def _write_marker_retrying(self, part: PartitionLog, action: WriteMarkers, now: int) -> ErrorCode:
        """A storage error is retried with backoff: a transaction must never stay half-marked.
        Producer-state rejections (an obsolete marker) are final."""
        delay = 0.1
        while True:
            try:
                return write_marker(
                    part, action.producer_id, action.producer_epoch, action.commit,
                    action.coordinator_epoch, now_ms=now,
                )
            except OSError:
                log.exception("marker write for %s failed; retrying", action.transactional_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # -- queries used by other components ------------------------------------------
    def in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1: may a transactional produce for ``tp`` land now?"""
        meta = self.coordinator.describe(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch < meta.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if meta.state is not TxnState.ONGOING or tp not in meta.partitions or producer_epoch != meta.producer_epoch:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none
