"""The loop that runs one source task with exactly-once delivery (KIP-618).

It implements the hooks of the base source loop (``abstract_source_task``): every
record goes to Kafka inside a producer transaction of
the task's transactional producer (``transactional.id = ${groupId}-${connector}-${taskId}``),
and when the transaction ends, the source offsets of its records are written to the
offsets topic *inside the same transaction*, which is then committed. Offsets are
therefore committed if and only if their records are.

Transaction boundaries (``transaction.boundary``):

- ``poll``: one transaction per non-empty batch returned by ``SourceTask.poll``;
- ``interval``: a commit every ``transaction.boundary.interval.ms`` (by default the
  worker's ``offset.flush.interval.ms``);
- ``connector``: where the task asks through its ``TransactionContext`` (after a
  record or after the next batch, commit or abort).

``commit_record`` and ``commit`` are called only after a commit succeeded. A failed
commit (a timed-out transaction, a producer fenced out by a newer instance of the
task) fails the task, with remedies in the message. At shutdown the open transaction
is committed, except with connector-defined boundaries, where it is aborted: only the
task knows where a transaction may end.

Startup: ``before_first_poll`` (the worker's check that the task is still of the
latest generation and assigned here) runs, so an instance stopped or replaced meanwhile
never initializes a producer that would fence its successor (Kafka's
``preProducerCheck``); ``init_transactions`` fences older instances of the same
transactional id (and completes their last transaction); the check runs again (KIP-618
startup steps 6-7, ``postProducerCheck``); then the offsets are read to the end
(``load_offsets``), and the task starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from oncelog.connect.api.connector import RecordMetadata, SourceRecord, SourceTask, partition_key
from oncelog.connect.api.converters import Converter
from oncelog.connect.api.errors import ConnectException, ProducerFencedError
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.abstract_source_task import (
    AbstractWorkerSourceTask,
    DeliveryCallback,
    OutgoingRecord,
    RecordSender,
)
from oncelog.connect.runtime.error_handling import NO_TOLERANCE, ErrorPolicy
from oncelog.connect.runtime.task_context import WorkerTransactionContext
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.runtime.worker_source_task import OffsetCopier
from oncelog.connect.storage.offset_records import OffsetRecord
from oncelog.connect.storage.offset_records import encode as encode_offset
from oncelog.connect.storage.offsets import MemoryOffsetStore

log = logging.getLogger(__name__)

POLL = "poll"
INTERVAL = "interval"
CONNECTOR = "connector"

# A commit may take as long as it needs (KIP-618 ignores offset.flush.timeout.ms);
# the producer's own delivery and transaction timeouts bound it.
_NO_DEADLINE_S = 24 * 3600.0

REMEDIES = (
    "If the transaction timed out, you can: tune the connector's producer for higher "
    "throughput (producer.override.* settings such as batch.size and linger.ms), increase "
    "the transaction timeout of its producer (producer.override.transaction.timeout.ms), "
    "decrease the transaction interval (transaction.boundary.interval.ms, or the worker's "
    "offset.flush.interval.ms) if it uses interval boundaries, or set transaction.boundary "
    "to poll."
)


class TransactionalSender(RecordSender, Protocol):
    """The task's transactional producer."""

    def init_transactions(self, timeout_s: float) -> None: ...

    def begin_transaction(self) -> None: ...

    def write(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Produce keyed records into the open transaction (no waiting)."""

    def commit_transaction(self, timeout_s: float) -> None: ...

    def abort_transaction(self, timeout_s: float) -> None: ...

    def close(self) -> None: ...


@dataclass
class TransactionSizes:
    """``transaction-size-min`` / ``-max`` / ``-avg``: records per committed transaction."""

    count: int = 0
    total: int = 0
    min: int | None = None
    max: int | None = None

    def record(self, size: int) -> None:
        self.count += 1
        self.total += size
        self.min = size if self.min is None else min(self.min, size)
        self.max = size if self.max is None else max(self.max, size)

    @property
    def avg(self) -> float | None:
        return None if self.count == 0 else self.total / self.count

    def as_dict(self) -> dict[str, Any]:
        return {
            "transaction-size-min": self.min,
            "transaction-size-max": self.max,
            "transaction-size-avg": self.avg,
            "transactions-committed": self.count,
        }


class ExactlyOnceWorkerSourceTask(AbstractWorkerSourceTask):
    def __init__(
        self,
        task_id: ConnectorTaskId,
        task: SourceTask,
        task_config: dict[str, str],
        *,
        key_converter: Converter,
        value_converter: Converter,
        chain: TransformationChain,
        sender: TransactionalSender,
        offsets: MemoryOffsetStore,
        offsets_topic: str,
        load_offsets: Callable[[], MemoryOffsetStore] | None = None,
        boundary: str = POLL,
        boundary_interval_ms: int = 60_000,
        global_copier: OffsetCopier | None = None,
        before_first_poll: Callable[[], None] | None = None,
        errors: ErrorPolicy = NO_TOLERANCE,
        init_timeout_ms: int = 60_000,
        clock: Callable[[], float] = time.monotonic,
        active_topics: Callable[[str], None] = lambda topic: None,
    ) -> None:
        super().__init__(
            task_id,
            task,
            task_config,
            key_converter=key_converter,
            value_converter=value_converter,
            chain=chain,
            sender=sender,
            offsets=offsets,
            errors=errors,
            commit_interval_ms=boundary_interval_ms,
            clock=clock,
            active_topics=active_topics,
        )
        if boundary not in (POLL, INTERVAL, CONNECTOR):
            raise ConnectException(f"Unknown transaction boundary {boundary!r}")
        self.txn_sender = sender
        self.offsets_topic = offsets_topic
        self.boundary = boundary
        self.global_copier = global_copier
        self.before_first_poll = before_first_poll
        self.load_offsets = load_offsets
        self.init_timeout_s = init_timeout_ms / 1000
        self.transaction_context = WorkerTransactionContext() if boundary == CONNECTOR else None
        self.transactions = TransactionSizes()
        self.aborted_transactions = 0
        self._open = False
        self._txn_records: list[SourceRecord] = []  # sent or dropped, in order
        self._txn_size = 0  # records sent in the open transaction
        self._stop_requested = False
        self._txn_meta: dict[int, RecordMetadata | None] = {}
        self._txn_offsets: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        try:
            # Kafka's preProducerCheck: an instance that was stopped, revoked or replaced
            # by a newer generation must not initialize its producer, which would fence
            # its successor (the same transactional id).
            if self._stop_requested:
                raise ConnectException(f"{self.id} was stopped before its producer started")
            if self.before_first_poll is not None:
                self.before_first_poll()
            self.txn_sender.init_transactions(self.init_timeout_s)
            # And the postProducerCheck: still current once the producer has fenced its
            # predecessors (KIP-618 startup steps 6-7).
            if self.before_first_poll is not None:
                self.before_first_poll()
            if self.load_offsets is not None:
                # Only now: a predecessor's last transaction is complete once ours is initialized.
                self.offsets = self.load_offsets()
        except BaseException:
            # The task never started: release the producer (and its transactional id).
            self.txn_sender.close()
            if self.global_copier is not None:
                self.global_copier.close(0)
            raise
        super().start()

    def context(self) -> WorkerTransactionContext | None:
        return self.transaction_context

    def stop(self) -> None:
        self._stop_requested = True
        super().stop()

    def final_offset_commit(self, failed: bool) -> bool:
        """Never on the failure path (Kafka's ``finalOffsetCommit``): nothing of the
        failed batch becomes visible, and its offsets are not committed. Kafka leaves the
        open transaction to its successor or to the timeout; here it is aborted at once,
        so it holds back no read_committed consumer meanwhile. Otherwise the final
        transaction ends as the boundary says (``maybeCommitFinalTransaction``); with
        connector-defined boundaries a transaction the task did not end is aborted."""
        if failed:
            self._abort_quietly()
            return False
        if not self._commit_final_transaction() and self.boundary == CONNECTOR:
            self.abort_transaction()
        return True

    def on_pause(self) -> None:
        """Commit now, so a pause longer than the transaction timeout neither fences the
        task nor holds back read_committed consumers (Kafka's ``onPause``). With
        connector-defined boundaries only what the task asked for is done."""
        self._commit_final_transaction()

    def on_resume(self) -> None:
        self._next_commit = self.clock() + self.flush_interval_s

    def _commit_final_transaction(self) -> bool:
        """Kafka's ``maybeCommitFinalTransaction``; True if the transaction ended."""
        if self.transaction_context is None:
            self.commit_transaction()
            return True
        request = self.transaction_context.take_batch_request()
        self._end_transaction(request)
        return request is not None

    def _abort_quietly(self) -> None:
        try:
            self.abort_transaction()
        except ConnectException as exc:
            log.warning("%s: aborting the failed task's transaction failed: %s", self.id, exc)

    def release(self) -> None:
        self.txn_sender.close()
        if self.global_copier is not None:
            self.global_copier.close(5.0)

    # -- records -------------------------------------------------------------------------

    def prepare_to_send_record(self, record: SourceRecord, out: OutgoingRecord) -> int:
        if out.topic == self.offsets_topic:
            # Reading offsets (read_committed) would wait for the task's own open transaction.
            raise ConnectException(
                f"Task {self.id} tried to write a record to topic '{out.topic}', which is the "
                "offsets topic this connector uses. With exactly-once source support a task may "
                "not produce to its own offsets topic: its records and offsets share a "
                "transaction, and reading the offsets topic would wait for that transaction. "
                "Write the records to another topic, or give the connector a separate "
                "offsets.storage.topic."
            )
        self._txn_records.append(record)
        self._txn_offset(record)
        self._txn_size += 1
        try:
            self._begin()
        except ConnectException as exc:
            raise self._send_failed(exc) from exc
        return len(self._txn_records) - 1

    def dispatch(self, out: OutgoingRecord, on_delivery: DeliveryCallback) -> None:
        try:
            super().dispatch(out, on_delivery)
        except ConnectException as exc:
            raise self._send_failed(exc) from exc

    def _send_failed(self, exc: ConnectException) -> ConnectException:
        return self._failure("failed to send a record of its producer transaction", exc)

    def _failure(self, what: str, exc: BaseException) -> ConnectException:
        """The task's failure, with the remedies where they help: not when the producer
        was fenced out, which is zombie fencing doing its job (a newer instance of the
        task took over)."""
        if isinstance(exc, ProducerFencedError):
            return ProducerFencedError(
                f"{self.id}: {what}: {exc}. A newer instance of this task took over its "
                "transactional id; this instance stops."
            )
        return ConnectException(f"{self.id}: {what}: {exc}. {REMEDIES}")

    def record_sent(self, record: SourceRecord, slot: int, meta: RecordMetadata | None) -> None:
        self._txn_meta[slot] = meta

    def record_dropped(self, record: SourceRecord) -> None:
        # Its offset is committed with the transaction it was dropped in, and the task
        # hears of it once that commits (Kafka keeps it among the committable records).
        self._txn_offset(record)
        self._txn_records.append(record)

    def record_dispatched(self, record: SourceRecord) -> None:
        if self.transaction_context is not None:
            self._end_transaction(self.transaction_context.take_record_request(record))

    def batch_dispatched(self, records: Sequence[SourceRecord]) -> None:
        if self.transaction_context is not None:
            self._end_transaction(self.transaction_context.take_batch_request())
        elif self.boundary == POLL:
            if records:
                self.commit_transaction()
        elif self.clock() >= self._next_commit:
            self.commit_transaction()

    def send_error(self, error: Exception) -> Exception:
        return ConnectException(
            f"{self.id}: a record of the current transaction could not be sent: {error}. {REMEDIES}"
        )

    def _txn_offset(self, record: SourceRecord) -> None:
        if record.source_partition is None or record.source_offset is None:
            return
        key = partition_key(record.source_partition)
        self._txn_offsets[key] = (dict(record.source_partition), dict(record.source_offset))

    # -- transactions --------------------------------------------------------------------

    def _begin(self) -> None:
        if not self._open:
            self.txn_sender.begin_transaction()
            self._open = True

    def _end_transaction(self, request: str | None) -> None:
        if request == "commit":
            self.commit_transaction()
        elif request == "abort":
            self.abort_transaction()
            self.commit_transaction()  # the aborted records' offsets, in a new transaction

    def commit_offsets(self) -> bool:
        self.commit_transaction()
        return True

    def commit_transaction(self) -> None:
        """Write the transaction's offsets into it and commit; then tell the task."""
        self._next_commit = self.clock() + self.flush_interval_s
        if not self._txn_records and not self._txn_offsets:
            self._reset()
            return
        self._begin()
        offsets = [
            encode_offset(OffsetRecord(self.id.connector, partition, offset))
            for partition, offset in self._txn_offsets.values()
        ]
        try:
            if self.sender.flush(_NO_DEADLINE_S):
                raise ConnectException("records of the transaction are still outstanding")
            if self._send_error is not None:
                raise self._send_error
            self.txn_sender.write(self.offsets_topic, offsets)
            self.txn_sender.commit_transaction(_NO_DEADLINE_S)
        except Exception as exc:
            self.metrics.offset_commit_failures += 1
            raise self._failure("failed to commit its producer transaction", exc) from exc
        self.metrics.offset_commits += 1
        self.transactions.record(self._txn_size)
        self.offsets.commit({key: offset for key, (_, offset) in self._txn_offsets.items()})
        if self.global_copier is not None and offsets:
            self.global_copier.copy(offsets)
        committed = [(r, self._txn_meta.get(i)) for i, r in enumerate(self._txn_records)]
        self._reset()
        for record, meta in committed:
            self.task.commit_record(record, meta)
        self.task.commit()

    def abort_transaction(self) -> None:
        """Discard the transaction's records. Their source offsets stay, to be committed
        by the next commit: an aborted record is not polled again (Kafka's connector
        boundary manager aborts, then commits the offsets in a new transaction)."""
        if self._open:
            self.sender.flush(_NO_DEADLINE_S)  # sent records must reach the broker aborted
            try:
                self.txn_sender.abort_transaction(_NO_DEADLINE_S)
            except ConnectException as exc:
                raise ConnectException(
                    f"{self.id}: failed to abort its producer transaction: {exc}"
                ) from exc
            self.aborted_transactions += 1
        else:
            log.warning("%s: ignoring the task's request to abort an empty transaction", self.id)
        self._send_error = None
        self._open = False
        self._txn_size = 0

    def _reset(self) -> None:
        self._open = False
        self._txn_size = 0
        self._txn_records = []
        self._txn_meta = {}
        self._txn_offsets = {}
