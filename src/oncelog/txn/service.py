"""TransactionService: the transaction coordinator behind plain async methods.

It owns the sans-IO ``TransactionCoordinator`` and a ``CoordinatorRuntime`` that performs
its steps: appends to ``__transaction_state`` and, after an EndTxn (or a fence/timeout),
the markers, through the shared ``MarkerWriter``. Marker writing is scheduled on the event
loop after the EndTxn response, as Kafka's ``TransactionMarkerChannelManager`` writes them
asynchronously; the blocking begin (``oncelog.txn.blocking.begin``) then matters. The
clock is read here, never in the API layer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog import hooks
from oncelog.clock import Clock, now_ms
from oncelog.coordinator.internal_topics import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalTopics,
    internal_topic_config,
    skip_undecodable,
)
from oncelog.coordinator.runtime import Append, CoordinatorRuntime
from oncelog.records.batch import InvalidRecordError
from oncelog.storage.errors import LogError
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.replay import LogBatch, log_entries
from oncelog.txn.config import TxnConfig
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.log_codec import (
    TxnLogCodecError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    is_legacy_value,
)
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.messages import Reply, TxnMarker, TxnStep, WriteMarkers
from oncelog.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)

log = logging.getLogger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 0.1, 5.0


@dataclass(slots=True)
class _PendingMarkers:
    """An ended transaction whose markers are not all written: ``todo`` shrinks as they
    are."""

    action: WriteMarkers
    todo: list[TopicPartition]
    ended_at: float  # time.monotonic(): real time, whatever the coordinator's clock


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
        durable: GroupSync | None = None,
    ) -> None:
        self.config = config
        self._topics = topics
        self._markers = markers
        self._allocate_producer_id = allocate_producer_id
        self._epoch_path = epoch_path
        self._clock = clock
        self._durable = durable
        self.coordinator = TransactionCoordinator(
            allocate_producer_id=allocate_producer_id, config=config
        )
        self.runtime: CoordinatorRuntime[Reply, WriteMarkers] = CoordinatorRuntime(
            name="transaction coordinator",
            topic=TRANSACTION_STATE_TOPIC,
            partitions=topics,
            feedback=self,
            clock=clock,
            durable=durable,
            playback=self,
            served="transactional ids",
        )
        self.skipped_records = 0  # undecodable __transaction_state records seen at start
        # The last load of each partition: records loaded, undecodable records skipped.
        self._records: dict[int, int] = {}
        self._skipped: dict[int, int] = {}
        self._rewritten = 0  # legacy-layout values rewritten by the load under way
        self._marker_queue: list[_PendingMarkers] = []  # ended transactions awaiting markers
        self._marker_writer_running = False
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, background: bool = False) -> None:
        """Create/load ``__transaction_state``, finish prepared transactions, start timers.

        ``background`` (the broker's start): the runtime's loader loads each partition on
        the event loop while the broker serves, as Kafka's TransactionStateManager does;
        an id gets COORDINATOR_LOAD_IN_PROGRESS until its partition is loaded (see
        ``coordinator.loader``). Otherwise the load runs to completion here."""
        self.coordinator.coordinator_epoch = next_coordinator_epoch(self._epoch_path)
        parts = self._topics.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC,
            self.config.txn_log_partitions,
            internal_topic_config(self.config.txn_log_segment_bytes),
        )
        # Placement follows the topics as they are on disk, never the configured counts:
        # hash % count must not move an id (or a group) away from its state.
        self.coordinator.txn_log_partitions = len(parts)
        self.coordinator.offsets_partitions = (
            self._topics.partition_count(CONSUMER_OFFSETS_TOPIC) or self.config.offsets_partitions
        )
        self._records, self._skipped = {}, {}
        # Only loaded partitions' transactions time out.
        self.runtime.start_timer(
            self.coordinator.expire, max_wait_ms=self.config.abort_check_interval_ms
        )
        self.runtime.loader.start(parts, background=background)

    @property
    def loaded(self) -> bool:
        """Every ``__transaction_state`` partition is loaded."""
        return self.runtime.loader.loaded

    @property
    def load_time_s(self) -> float:
        """How long the load of ``__transaction_state`` under way or last done took."""
        return self.runtime.loader.load_time_s

    async def _await_load(self, transactional_id: str | None) -> None:
        """A request for an id whose partition still loads waits for it (at most
        ``load_wait_ms``), as group requests do, before COORDINATOR_LOAD_IN_PROGRESS."""
        if transactional_id:
            partition = self.coordinator.txn_log_partition(transactional_id)
            await self.runtime.loader.until_loaded(partition, self.config.load_wait_ms / 1000)

    # -- the loader's playback -------------------------------------------------------------

    def begin_load(self, partition: int) -> _TxnReplay:
        self._records[partition] = self._skipped[partition] = 0
        return _TxnReplay(self, partition)

    def mark_loading(self, partition: int) -> None:
        self.coordinator.mark_loading(partition)

    def mark_failed(self, partition: int) -> None:
        self.coordinator.mark_failed(partition)

    def all_loaded(self) -> None:
        if self._rewritten:
            log.info("rewrote %d legacy-layout __transaction_state values", self._rewritten)
            self._rewritten = 0
        self.skipped_records = sum(self._skipped.values())
        log.info(
            "loaded %d transactional ids from %d records (%d undecodable, skipped) in %.3fs",
            self.coordinator.num_transactional_ids,
            sum(self._records.values()),
            self.skipped_records,
            self.load_time_s,
        )

    def _loaded_partition(self, partition: int, records: list[tuple[str, bytes | None]]) -> None:
        latest = {txn_id: (partition, value) for txn_id, value in records}
        # Before the load's own appends, so a completion it starts is written after.
        self._rewrite_legacy_values(latest)
        self.runtime.run(self.coordinator.load_partition(partition, records, now_ms=self._clock()))

    def _rewrite_legacy_values(self, latest: dict[str, tuple[int, bytes | None]]) -> None:
        """Rewrite, in Kafka's layout, each id whose latest value is in oncelog's legacy
        layout (same key, same state), so Kafka's tools read the whole log once cleaned."""
        for txn_id, (partition, value) in latest.items():
            if value is None or not is_legacy_value(value):
                continue
            record = (encode_key(txn_id), encode_value(decode_value(txn_id, value)))
            if self.runtime.append_unowned(Append(partition, (record,))) is not ErrorCode.none:
                return  # the legacy value still loads; the next start-up tries again
            self._rewritten += 1

    async def stop(self) -> None:
        self._stopped = True
        await self.runtime.stop()

    # -- requests ----------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        *,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> Reply:
        if transactional_id is None:
            if enable_2pc or keep_prepared_txn:
                return Reply(ErrorCode.invalid_request)  # 2PC needs a transactional id
            # Like Kafka, an idempotent producer always gets a fresh id (also on the
            # KIP-360 form that names its old id and epoch): sequences restart at 0.
            return Reply(ErrorCode.none, self._allocate_producer_id(), 0)
        await self._await_load(transactional_id)
        return await self.runtime.call(
            self.coordinator.init_producer_id(
                transactional_id,
                timeout_ms,
                producer_id,
                producer_epoch,
                now_ms=self._clock(),
                enable_2pc=enable_2pc,
                keep_prepared_txn=keep_prepared_txn,
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
        transaction_version: int = TV_0,
    ) -> Reply:
        """AddPartitionsToTxn. Kafka rejects the whole request if a partition does not
        exist: those get UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED.
        ``transaction_version=TV_2`` is the implicit add of a TV2 Produce (v12)."""
        await self._await_load(transactional_id)
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
            transaction_version=transaction_version,
        )
        return await self._call_parkable(step)

    async def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        transaction_version: int = TV_0,
    ) -> Reply:
        """AddOffsetsToTxn, or (``transaction_version=TV_2``) TxnOffsetCommit v5's implicit add."""
        await self._await_load(transactional_id)
        step = self.coordinator.add_offsets(
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
            now_ms=self._clock(),
            transaction_version=transaction_version,
        )
        return await self._call_parkable(step)

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        transaction_version: int = TV_0,
    ) -> Reply:
        """EndTxn; with ``transaction_version=TV_2`` (v5) the epoch is bumped and the reply
        carries the producer id and epoch of the next transaction."""
        await self._await_load(transactional_id)
        return await self.runtime.call(
            self.coordinator.end_txn(
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                now_ms=self._clock(),
                transaction_version=transaction_version,
            )
        )

    async def _call_parkable(self, step: TxnStep) -> Reply:
        # Blocking begin (oncelog.txn.blocking.begin) parks the request, for a bounded time.
        return await self.runtime.call(
            step, timeout_s=self.config.blocking_max_wait_ms / 1000, cancel=self.coordinator.cancel
        )

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        """WriteTxnMarkers for one partition (admin tools abort hanging transactions).

        On an internal topic only a marker that ends a transaction open there is written
        (an admin abort of a hanging TxnOffsetCommit); ``__transaction_state`` never holds
        transactional data. Any other, foreign, marker is refused as Kafka refuses client
        writes to internal topics."""
        if topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            part = self._topics.partition(topic, partition)
            entry = None if part is None else part.producer_entry(marker.producer_id)
            if (
                topic == TRANSACTION_STATE_TOPIC
                or entry is None
                or entry.current_txn_first_offset is None
            ):
                # a client's fault: the caller reports it (WriteTxnMarkers notes it)
                log.debug(
                    "refused a foreign marker for producer %d on %s-%d",
                    marker.producer_id,
                    topic,
                    partition,
                )
                return ErrorCode.invalid_topic_exception
        try:
            code = self._markers.write(topic, partition, marker, now_ms=self._clock())
            if code is ErrorCode.none:
                await self._until_durable([(topic, partition)])
            return code
        except OSError:
            log.exception("marker write to %s-%d failed", topic, partition)
            return ErrorCode.kafka_storage_error
        except LogError as exc:
            log.debug("marker for %s-%d rejected: %s", topic, partition, exc)
            return exc.error_code
        except InvalidRecordError as exc:  # producer id -1: no producer owns such a marker
            log.debug("marker for %s-%d rejected: %s", topic, partition, exc)
            return ErrorCode.invalid_record

    async def _until_durable(self, partitions: Iterable[TopicPartition]) -> None:
        """With durable acknowledgements: wait for an fdatasync of these partitions."""
        if self._durable is None:
            return
        logs = (self._topics.partition(*tp) for tp in partitions)
        await self._durable.wait({p: p.log_end_offset for p in logs if p is not None})

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
        return rest.merge(
            self.coordinator.on_log_appended(append.owner, now_ms=now_ms, error=error)
        )

    def perform(self, effect: WriteMarkers) -> None:
        self._marker_queue.append(
            _PendingMarkers(effect, sorted(effect.partitions), time.monotonic())
        )
        if not self._marker_writer_running:
            self._marker_writer_running = True
            self.runtime.spawn(self._write_markers())

    async def _write_markers(self) -> None:
        """The one marker-writing path: a task that drains the queue of ended
        transactions, all of them per turn (no task per transaction), after their EndTxn
        responses went out, like Kafka's remote marker writer
        (``TransactionMarkerChannelManager``). A failed write or sync is retried with one
        back-off, for ever: a transaction must never stay half-marked. A transaction is
        complete once its markers are written, and durable under acks=all durability."""
        delay_s = hooks.delay_ms("txn.markers") / 1000
        backoff_s = RETRY_MIN_S
        try:
            while self._marker_queue and not self._stopped:
                # Yield at least once, so the EndTxn response leaves first; the test hook
                # holds each transaction's markers back for its delay from its end.
                hold_s = self._marker_queue[0].ended_at + delay_s - time.monotonic()
                await asyncio.sleep(max(hold_s, 0.0))
                due = time.monotonic() - delay_s
                batch = [m for m in self._marker_queue if m.ended_at <= due]
                self._marker_queue = [m for m in self._marker_queue if m.ended_at > due]
                now = self._clock()
                written: list[_PendingMarkers] = []
                failed: list[_PendingMarkers] = []
                for pending in batch:
                    outcome = self._write_pending(pending, now)
                    if outcome is not None:
                        (written if outcome else failed).append(pending)
                if written and self._durable is not None:
                    try:
                        await self._until_durable(
                            tp for pending in written for tp in pending.action.partitions
                        )
                    except OSError:
                        log.exception("marker sync failed; retrying")
                        failed = [*written, *failed]
                        written = []
                for pending in written:
                    self.runtime.run(
                        self.coordinator.on_markers_written(
                            pending.action.transactional_id, now_ms=self._clock()
                        )
                    )
                if failed:
                    self._marker_queue = [*failed, *self._marker_queue]
                    await asyncio.sleep(backoff_s)
                    backoff_s = min(backoff_s * 2, RETRY_MAX_S)
                else:
                    backoff_s = RETRY_MIN_S
        finally:
            self._marker_writer_running = False

    def _write_pending(self, pending: _PendingMarkers, now: int) -> bool | None:
        """Write what remains of one transaction's markers; False if a storage failure
        left some to retry (``pending.todo`` keeps them), None if a bug stopped it (logged;
        the transaction stays unfinished, as it would after a crash, for the next
        start-up to complete)."""
        action = pending.action
        try:
            while pending.todo:
                self._write_one_marker(action, *pending.todo[0], now)
                del pending.todo[0]
        except OSError:
            log.exception("marker write for %s failed; retrying", action.transactional_id)
            return False
        except Exception:  # one transaction's bug must not strand the others queued
            log.exception("writing the markers of %s failed", action.transactional_id)
            return None
        return True

    def _write_one_marker(self, action: WriteMarkers, topic: str, index: int, now: int) -> None:
        """One partition's marker; raises ``OSError`` on a storage failure (retried).
        Producer-state rejections (an obsolete marker) are final."""
        code = self._markers.write(topic, index, action.marker, now_ms=now, only_if_written=True)
        # (a partition deleted meanwhile needs no marker)
        if code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
            log.warning(
                "marker of %s for %s-%d rejected: %s",
                action.transactional_id, topic, index, code.name,
            )  # fmt: skip


class _TxnReplay:
    """One load of one ``__transaction_state`` partition: its decodable (id, value)
    records, handed to the core once the log is read to its end."""

    def __init__(self, service: TransactionService, partition: int) -> None:
        self._service = service
        self._partition = partition
        self._records: list[tuple[str, bytes | None]] = []

    def replay(self, batch: LogBatch) -> None:
        for entry in log_entries((batch,)):
            if entry.key is None or entry.marker_commit is not None:
                continue
            try:
                txn_id = decode_key(entry.key)
                if entry.value is not None:
                    decode_value(txn_id, entry.value)
            except TxnLogCodecError as exc:
                skip_undecodable(log, TRANSACTION_STATE_TOPIC, self._partition, entry.offset, exc)
                self._service._skipped[self._partition] += 1
                continue
            self._records.append((txn_id, entry.value))
            self._service._records[self._partition] += 1

    def complete(self) -> None:
        self._service._loaded_partition(self._partition, self._records)
