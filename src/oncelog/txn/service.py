"""TransactionService: the transaction coordinator behind plain async methods.

It owns the sans-IO ``TransactionCoordinator`` and a ``CoordinatorRuntime`` that performs
its steps: appends to ``__transaction_state`` and, after an EndTxn (or a fence/timeout),
the markers, through the shared ``MarkerWriter``. Marker writing is scheduled on the event
loop after the EndTxn response, as a real (remote) marker writer would be asynchronous; seed
003's blocking begin then matters. The clock is read here, never in the API layer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog.clock import Clock, now_ms
from oncelog.coordinator.internal_topics import (
    INTERNAL_TOPIC_CONFIG,
    TRANSACTION_STATE_TOPIC,
    InternalTopics,
)
from oncelog.coordinator.runtime import Append, CoordinatorRuntime
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.replay import iter_log
from oncelog.txn.config import TxnConfig
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.messages import Reply, TxnMarker, TxnStep, WriteMarkers
from oncelog.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)

log = logging.getLogger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 0.1, 5.0


def next_coordinator_epoch(path: Path) -> int:
    """A coordinator epoch that grows across restarts, so partitions fence markers
    from an older incarnation."""
    epoch = 0
    if path.exists():
        epoch = int(json.loads(path.read_text())["coordinator_epoch"]) + 1
    atomic_write(path, json.dumps({"coordinator_epoch": epoch}).encode())
    return epoch


class TransactionService:
    def __init__(
        self,
        config: TxnConfig,
        *,
        topics: InternalTopics,
        markers: MarkerWriter,
        allocate_producer_id: Callable[[], int],
        epoch_path: Path,
        clock: Clock = now_ms,
    ) -> None:
        self.config = config
        self._topics = topics
        self._markers = markers
        self._allocate_producer_id = allocate_producer_id
        self._epoch_path = epoch_path
        self._clock = clock
        self.coordinator = TransactionCoordinator(
            allocate_producer_id=allocate_producer_id, config=config
        )
        self.runtime: CoordinatorRuntime[Reply] = CoordinatorRuntime(
            name="transaction coordinator",
            topic=TRANSACTION_STATE_TOPIC,
            partitions=topics,
            feedback=self,
            clock=clock,
        )
        self.loaded = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Create/load ``__transaction_state``, finish prepared transactions, start timers."""
        self.coordinator.coordinator_epoch = next_coordinator_epoch(self._epoch_path)
        now = self._clock()
        parts = self._topics.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC,
            self.config.txn_log_partitions,
            INTERNAL_TOPIC_CONFIG,
            now_ms=now,
        )
        started = time.monotonic()
        records: list[tuple[bytes, bytes | None]] = []
        for part in parts:
            for entry in iter_log(part):
                if entry.key is not None and entry.marker_commit is None:
                    records.append((entry.key, entry.value))
        self.runtime.run(self.coordinator.load(records, now_ms=now))
        self.loaded = True
        log.info(
            "loaded %d transactional ids from %d records in %.3fs",
            self.coordinator.num_transactional_ids,
            len(records),
            time.monotonic() - started,
        )
        self.runtime.start_timer(
            self.coordinator.expire, max_wait_ms=self.config.abort_check_interval_ms
        )

    async def stop(self) -> None:
        await self.runtime.stop()

    # -- requests ----------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Reply:
        if transactional_id is None:
            # Like Kafka, an idempotent producer always gets a fresh id (also on the
            # KIP-360 form that names its old id and epoch): sequences restart at 0.
            return Reply(ErrorCode.none, self._allocate_producer_id(), 0)
        return await self.runtime.call(
            self.coordinator.init_producer_id(
                transactional_id, timeout_ms, producer_id, producer_epoch, now_ms=self._clock()
            )
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        verify_only: bool = False,
    ) -> Reply:
        """AddPartitionsToTxn. Kafka rejects the whole request if a partition does not
        exist: those get UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED."""
        parts = list(partitions)
        unknown = {tp for tp in parts if self._topics.partition(*tp) is None}
        if unknown:
            return Reply(
                ErrorCode.none,
                partition_errors={
                    tp: ErrorCode.unknown_topic_or_partition
                    if tp in unknown
                    else ErrorCode.operation_not_attempted
                    for tp in parts
                },
            )
        step = self.coordinator.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            parts,
            now_ms=self._clock(),
            verify_only=verify_only,
        )
        return await self._call_parkable(step)

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Reply:
        step = self.coordinator.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, now_ms=self._clock()
        )
        return await self._call_parkable(step)

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Reply:
        return await self.runtime.call(
            self.coordinator.end_txn(
                transactional_id, producer_id, producer_epoch, commit, now_ms=self._clock()
            )
        )

    async def _call_parkable(self, step: TxnStep) -> Reply:
        # Seed 003's blocking begin parks the request, for a bounded time.
        return await self.runtime.call(
            step, timeout_s=self.config.blocking_max_wait_ms / 1000, cancel=self.coordinator.cancel
        )

    def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        """WriteTxnMarkers for one partition (admin tools abort hanging transactions)."""
        try:
            return self._markers.write(topic, partition, marker, now_ms=self._clock())
        except OSError:
            log.exception("marker write to %s-%d failed", topic, partition)
            return ErrorCode.kafka_storage_error

    # -- queries -----------------------------------------------------------------------

    def verify_in_transaction(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partition: TopicPartition,
        *,
        fenced: ErrorCode = ErrorCode.producer_fenced,
    ) -> ErrorCode:
        """Is this producer in an Ongoing transaction that holds ``partition``? Checked
        before a transactional Produce (KIP-890 part 1) and a TxnOffsetCommit (on the
        group's offsets partition). ``fenced`` is what the caller's API version calls a
        stale epoch (Produce and old versions know only INVALID_PRODUCER_EPOCH)."""
        if transactional_id is None:
            return ErrorCode.invalid_txn_state
        code = self.coordinator.verify_partition(
            transactional_id, producer_id, producer_epoch, partition
        )
        return fenced if code is ErrorCode.producer_fenced else code

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[tuple[str, TransactionMetadata | None]]:
        return [(t, self.coordinator.describe(t)) for t in transactional_ids]

    def list_transactions(
        self,
        states: Iterable[TxnState | str] | None = None,
        producer_ids: Iterable[int] | None = None,
        min_duration_ms: int | None = None,
    ) -> list[TransactionMetadata]:
        return self.coordinator.list(states, producer_ids, min_duration_ms, now_ms=self._clock())

    # -- the runtime's feedback ----------------------------------------------------------

    def appended(self, append: Append, now_ms: int) -> TxnStep:
        return self.coordinator.on_log_appended(append.owner, now_ms=now_ms)

    def append_failed(
        self, append: Append, error: ErrorCode, rest: TxnStep, now_ms: int
    ) -> TxnStep:
        # Appends of other ids in the same step still go ahead; only this id learns the error.
        out = self.coordinator.on_log_appended(append.owner, now_ms=now_ms, error=error)
        retry = [a for a in out.appends if a.owner == append.owner]
        if retry:
            # The outcome is decided: the completion record is retried, after a pause.
            out.appends = [a for a in out.appends if a.owner != append.owner]
            self.runtime.run_later(RETRY_MIN_S, lambda: TxnStep(appends=retry))
        rest.appends.extend(out.appends)
        rest.resolved.extend(out.resolved)
        rest.effects.extend(out.effects)
        return rest

    def perform(self, effect: object) -> None:
        assert isinstance(effect, WriteMarkers)
        self.runtime.spawn(self._write_markers(effect))

    async def _write_markers(self, action: WriteMarkers) -> None:
        # Let the EndTxn response go out first, like a remote marker writer.
        await asyncio.sleep(self.config.marker_delay_ms / 1000)
        now = self._clock()
        for topic, index in sorted(action.partitions):
            delay = RETRY_MIN_S
            while True:
                # A storage error is retried with backoff: a transaction must never stay
                # half-marked. Producer-state rejections (an obsolete marker) are final.
                try:
                    self._markers.write(
                        topic, index, action.marker, now_ms=now, only_if_written=True
                    )
                    break
                except OSError:
                    log.exception("marker write for %s failed; retrying", action.transactional_id)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
        self.runtime.run(
            self.coordinator.on_markers_written(action.transactional_id, now_ms=self._clock())
        )
