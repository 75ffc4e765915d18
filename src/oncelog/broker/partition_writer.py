"""PartitionWriter: the produce path behind the Produce API, as Kafka's ReplicaManager.

For each partition of a request: find the log, refuse internal topics, validate the batch
from its header (``storage.validator``), check a transactional batch against its
transaction (KIP-890 part 1), append, wake long-polling fetches. Then, for ``acks=all``
with ``oncelog.flush.on.ack``, wait until one group fdatasync has made every written
partition durable. Appends happen at once, in request order (``append``); only the
durability wait is awaited (``until_durable``), so the connection can dispatch its next
requests meanwhile and their appends join the same fdatasync. The clock is read here,
never in the handler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.topics import TopicRegistry
from oncelog.clock import Clock
from oncelog.coordinator.txn_verifier import TxnVerifier
from oncelog.records.batch import BatchHeader
from oncelog.storage.errors import LogError
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.producer_state import ProducerStateError
from oncelog.storage.unified_log import AppendResult, UnifiedLog
from oncelog.storage.validator import validate_produce_batch

log = logging.getLogger(__name__)

ACKS_ALL = -1


class ProduceError(Exception):
    """One partition's produce failed with ``error_code`` (KIP-192: sequence errors carry
    the log start offset, so a client can tell state lost to retention from a gap)."""

    def __init__(
        self,
        error_code: ErrorCode,
        message: str,
        log_start_offset: int = -1,
        record_errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.log_start_offset = log_start_offset
        # KIP-467: (batch index, message) of each record that failed the batch.
        self.record_errors = record_errors


_COORDINATOR_UNAVAILABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


class NotInTransaction(ProduceError):
    """A transactional batch for a partition its producer's transaction does not hold (or
    under a stale producer id/epoch). A TV2 Produce (v12+) adds the partition implicitly and
    retries; older versions answer ``error_code``."""

    def __init__(
        self, error_code: ErrorCode, message: str, producer_id: int, producer_epoch: int
    ) -> None:
        super().__init__(error_code, message)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch


@dataclass(frozen=True, slots=True)
class PartitionData:
    topic: str
    partition: int
    # A writable memoryview (a slice of the received frame, see protocol.produce_wire)
    # is appended in place; anything else is copied first.
    records: bytes | bytearray | memoryview | None


@dataclass(slots=True)
class ProduceOutcome:
    """Per entry, its result or error; ``unsynced``: what must be durable before the
    answer (empty unless acks=all under ``oncelog.flush.on.ack``)."""

    results: list[AppendResult | ProduceError]
    unsynced: dict[UnifiedLog, int]


@dataclass(slots=True)
class _Validated:
    """An entry whose batch passed validation, ready to append."""

    topic: str
    partition: int
    log: UnifiedLog
    header: BatchHeader
    records: bytearray | memoryview


@dataclass(slots=True)
class ProducePlan:
    """A request validated once, before anything is appended: per entry, the batch to
    append or the error to answer. ``to_add``: the entries whose transactional batch
    needs its partition added to the producer's transaction first (transaction version
    2); ``commit`` appends them only if the add succeeded (``refuse`` otherwise)."""

    acks: int
    transactional_id: str | None
    items: list[_Validated | ProduceError]
    to_add: list[NotInTransaction | None]
    # Every transactional batch was checked against its transaction while preparing.
    verified: bool = False

    def pending_adds(self) -> dict[tuple[int, int], list[int]]:
        """(producer id, epoch) -> indexes of the entries to add for it."""
        out: dict[tuple[int, int], list[int]] = {}
        for i, pending in enumerate(self.to_add):
            if pending is not None:
                out.setdefault((pending.producer_id, pending.producer_epoch), []).append(i)
        return out

    def partition_of(self, index: int) -> tuple[str, int]:
        item = self.items[index]
        assert isinstance(item, _Validated)
        return item.topic, item.partition

    def refuse(self, index: int, error: ProduceError) -> None:
        self.items[index] = error
        self.to_add[index] = None


class PartitionWriter:
    def __init__(
        self,
        topics: TopicRegistry,
        *,
        verify_txn: TxnVerifier,
        notifier: AppendNotifier,
        clock: Clock,
        durable: GroupSync | None = None,
    ) -> None:
        self._topics = topics
        self._verify_txn = verify_txn
        self._notifier = notifier
        self._clock = clock
        # Set: acks=all waits for an fdatasync of what it wrote (oncelog.flush.on.ack).
        self._durable = durable

    def append(
        self,
        entries: Sequence[PartitionData],
        *,
        acks: int,
        produce_version: int,
        transactional_id: str | None,
    ) -> ProduceOutcome:
        """Validate and append each entry, in order; then ``until_durable`` if
        ``unsynced``."""
        return self.commit(
            self.prepare(
                entries,
                acks=acks,
                produce_version=produce_version,
                transactional_id=transactional_id,
            )
        )

    def prepare(
        self,
        entries: Sequence[PartitionData],
        *,
        acks: int,
        produce_version: int,
        transactional_id: str | None,
        implicit_add: bool = False,
        refused_topics: Mapping[str, ProduceError] | None = None,
    ) -> ProducePlan:
        """Validate every entry (nothing is appended). With ``implicit_add`` (a
        transaction-version-2 Produce), a transactional batch for a partition its
        transaction does not hold yet is listed to add rather than refused. An entry of
        a topic in ``refused_topics`` (the handler's authorization) gets that error and
        is not looked at."""
        items: list[_Validated | ProduceError] = []
        to_add: list[NotInTransaction | None] = []
        now = self._clock()
        refused = refused_topics or {}
        for entry in entries:
            pending = None
            if entry.topic in refused:
                items.append(refused[entry.topic])
                to_add.append(None)
                continue
            try:
                if acks not in (0, 1, ACKS_ALL):
                    raise ProduceError(
                        ErrorCode.invalid_required_acks, f"Invalid required acks {acks}"
                    )
                item = self._validate(entry, produce_version, now)
                if implicit_add:
                    pending = self._not_in_transaction(item, transactional_id)
                items.append(item)
            except ProduceError as exc:
                # kept as an answer, not re-raised: its traceback (this frame, which holds
                # ``items``) would make a cycle only a full garbage collection frees
                items.append(exc.with_traceback(None))
            to_add.append(pending)
        return ProducePlan(acks, transactional_id, items, to_add, verified=implicit_add)

    def commit(self, plan: ProducePlan, *, after_wait: bool = False) -> ProduceOutcome:
        """Append the plan's validated batches in request order, each checked against its
        transaction (KIP-890 part 1) unless ``prepare`` just did, with nothing awaited
        since. ``after_wait``: the plan waited (an implicit add), so the transaction and
        the partition itself are checked again."""
        check_txn = after_wait or not plan.verified
        results: list[AppendResult | ProduceError] = []
        written: dict[UnifiedLog, int] = {}
        now = self._clock()
        for item in plan.items:
            if isinstance(item, ProduceError):
                results.append(item)
                continue
            try:
                result = self._append(item, plan.transactional_id, now, check_txn, after_wait)
                results.append(result)
                written[item.log] = result.last_offset + 1
            except ProduceError as exc:
                results.append(exc.with_traceback(None))
        durable = plan.acks == ACKS_ALL and self._durable is not None
        return ProduceOutcome(results, written if durable else {})

    async def until_durable(self, outcome: ProduceOutcome) -> list[AppendResult | ProduceError]:
        """The outcome's results once its appends are fsynced (a failed fdatasync turns
        every success into KAFKA_STORAGE_ERROR: nothing unsynced is acknowledged)."""
        if self._durable is None or not outcome.unsynced:
            return outcome.results
        try:
            await self._durable.wait(outcome.unsynced)
        except OSError as exc:
            failed = ProduceError(ErrorCode.kafka_storage_error, f"fdatasync failed: {exc}")
            return [failed if isinstance(r, AppendResult) else r for r in outcome.results]
        return outcome.results

    def _validate(self, entry: PartitionData, version: int, now: int) -> _Validated:
        topic, index = entry.topic, entry.partition
        t = self._topics.get(topic)
        if t is not None and t.internal:
            # Kafka's ReplicaManager: clients never append to the coordinators' topics.
            raise ProduceError(
                ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}"
            )
        part = self._topics.partition(topic, index)
        if part is None:
            raise ProduceError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        try:
            header = validate_produce_batch(
                entry.records,
                produce_version=version,
                config=part.config,
                now_ms=now,
                partition_name=f"{topic}-{index}",
            )
        except LogError as exc:
            record_errors = getattr(exc, "record_errors", ())
            raise ProduceError(exc.error_code, str(exc), record_errors=record_errors) from exc
        records = entry.records
        assert records is not None
        if not (isinstance(records, memoryview) and not records.readonly):
            records = bytearray(records)
        return _Validated(topic, index, part, header, records)

    def _not_in_transaction(
        self, item: _Validated, transactional_id: str | None
    ) -> NotInTransaction | None:
        """Why a transactional batch may not be appended now (KIP-890 part 1: a delayed
        produce must not land outside its transaction), or None."""
        header = item.header
        if not header.is_transactional:
            return None
        code = self._verify_txn(
            transactional_id,
            header.producer_id,
            header.producer_epoch,
            (item.topic, item.partition),
            fenced=ErrorCode.invalid_producer_epoch,
        )
        if code == ErrorCode.none:
            return None
        if code in _COORDINATOR_UNAVAILABLE:
            # Kafka's ReplicaManager: older clients may not retry a coordinator error (its
            # partition of __transaction_state still loads) correctly; NOT_ENOUGH_REPLICAS
            # makes them retry the produce, without a metadata refresh.
            code = ErrorCode.not_enough_replicas
        return NotInTransaction(
            code,
            f"partition {item.topic}-{item.partition} is not part of an ongoing transaction "
            f"of producer {header.producer_id} epoch {header.producer_epoch}",
            header.producer_id,
            header.producer_epoch,
        )

    def _append(
        self,
        item: _Validated,
        transactional_id: str | None,
        now: int,
        check_txn: bool,
        after_wait: bool,
    ) -> AppendResult:
        if after_wait and self._topics.partition(item.topic, item.partition) is not item.log:
            # Deleted (or re-created) while an implicit add was awaited.
            raise ProduceError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        if check_txn:
            refused = self._not_in_transaction(item, transactional_id)
            if refused is not None:
                raise refused
        part = item.log
        try:
            # The log writes the base offset (and LogAppendTime) into these bytes, then
            # pwrites them: no copy of the batch on the produce path.
            result = part.append(item.records, item.header, now_ms=now)
        except LogError as exc:
            start = part.log_start_offset if isinstance(exc, ProducerStateError) else -1
            raise ProduceError(exc.error_code, str(exc), start) from exc
        except OSError as exc:
            log.exception("storage error appending to %s-%d", item.topic, item.partition)
            raise ProduceError(ErrorCode.kafka_storage_error, str(exc)) from exc
        if not result.duplicate:
            self._notifier.notify((item.topic, item.partition))
        return result
