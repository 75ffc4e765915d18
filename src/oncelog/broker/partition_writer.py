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
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.topics import TopicRegistry
from oncelog.clock import Clock
from oncelog.coordinator.txn_verifier import TxnVerifier
from oncelog.storage.errors import LogError
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.log import AppendResult, PartitionLog
from oncelog.storage.producer_state import ProducerStateError
from oncelog.storage.validator import validate_produce_batch

log = logging.getLogger(__name__)

ACKS_ALL = -1


class ProduceError(Exception):
    """One partition's produce failed with ``error_code`` (KIP-192: sequence errors carry
    the log start offset, so a client can tell state lost to retention from a gap)."""

    def __init__(self, error_code: ErrorCode, message: str, log_start_offset: int = -1) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.log_start_offset = log_start_offset


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
    unsynced: dict[PartitionLog, int]


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
        """Append each entry, in order; then ``until_durable`` if ``unsynced``."""
        results: list[AppendResult | ProduceError] = []
        written: dict[PartitionLog, int] = {}
        for entry in entries:
            try:
                if acks not in (0, 1, ACKS_ALL):
                    raise ProduceError(
                        ErrorCode.invalid_required_acks, f"Invalid required acks {acks}"
                    )
                part, result = self._append(entry, produce_version, transactional_id)
                results.append(result)
                written[part] = result.last_offset + 1
            except ProduceError as exc:
                # kept as an answer, not re-raised: its traceback (this frame, which holds
                # ``results``) would make a cycle only a full garbage collection frees
                results.append(exc.with_traceback(None))
        durable = acks == ACKS_ALL and self._durable is not None
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

    def _append(
        self, entry: PartitionData, version: int, transactional_id: str | None
    ) -> tuple[PartitionLog, AppendResult]:
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
        now = self._clock()
        try:
            header = validate_produce_batch(
                entry.records, produce_version=version, config=part.config, now_ms=now
            )
            if header.is_transactional:
                # KIP-890 part 1: a delayed produce must not land outside its transaction.
                code = self._verify_txn(
                    transactional_id,
                    header.producer_id,
                    header.producer_epoch,
                    (topic, index),
                    fenced=ErrorCode.invalid_producer_epoch,
                )
                if code != ErrorCode.none:
                    raise NotInTransaction(
                        code,
                        f"partition {topic}-{index} is not part of an ongoing transaction of "
                        f"producer {header.producer_id} epoch {header.producer_epoch}",
                        header.producer_id,
                        header.producer_epoch,
                    )
            records = entry.records
            assert records is not None
            if not (isinstance(records, memoryview) and not records.readonly):
                records = bytearray(records)
            # The log writes the base offset (and LogAppendTime) into these bytes, then
            # pwrites them: no copy of the batch on the produce path.
            result = part.append(records, header, now_ms=now)
        except LogError as exc:
            start = part.log_start_offset if isinstance(exc, ProducerStateError) else -1
            raise ProduceError(exc.error_code, str(exc), start) from exc
        except OSError as exc:
            log.exception("storage error appending to %s-%d", topic, index)
            raise ProduceError(ErrorCode.kafka_storage_error, str(exc)) from exc
        if not result.duplicate:
            self._notifier.notify((topic, index))
        return part, result
