"""The loop that runs one source task (at-least-once delivery).

Each iteration polls the task, passes every record through the transformation chain
and the converters, and hands it to the producer. Offsets are committed every
``offset.flush.interval.ms``, and only for records the producer acknowledged with
every earlier record of the same source partition (:mod:`submitted_records`). A
commit writes the offsets to the offsets topic, waits for the write, updates the
task's offset view and calls ``SourceTask.commit()``. A crash between producing
and committing replays records, never skips them.

The polling, conversion and sending are the base loop's (``abstract_source_task``);
this module implements its hooks for at-least-once delivery. Offset writing goes
through a small interface (:class:`OffsetWriter`) that the client adapters implement,
so this loop holds no client code.

Error handling follows ``errors.tolerance``: with ``none`` a failing transform or
conversion fails the task; with ``all`` the record is skipped (and logged with
``errors.log.enable``), and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from oncelog.connect.api.connector import RecordMetadata, SourceRecord, SourceTask
from oncelog.connect.api.converters import Converter
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.abstract_source_task import (
    AbstractWorkerSourceTask,
    OutgoingRecord,
    RecordSender,
)
from oncelog.connect.runtime.error_handling import NO_TOLERANCE, ErrorPolicy
from oncelog.connect.runtime.submitted_records import SubmittedRecord, SubmittedRecords
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.storage.offset_records import OffsetRecord
from oncelog.connect.storage.offset_records import encode as encode_offset
from oncelog.connect.storage.offsets import MemoryOffsetStore

log = logging.getLogger(__name__)


class OffsetWriter(Protocol):
    """Writes (key, value) records to the offsets topic and waits for them."""

    def write(self, records: Sequence[tuple[bytes, bytes | None]], timeout_s: float) -> None: ...


class OffsetCopier(Protocol):
    """Copies committed offsets to the worker's global offsets topic, best effort, off
    the task's thread (for connectors with a separate offsets topic)."""

    def copy(self, records: Sequence[tuple[bytes, bytes | None]]) -> None: ...

    def close(self, timeout_s: float) -> None: ...


class CopyingOffsetWriter:
    """Writes to a connector's separate offsets topic, then queues a copy for the
    worker's global offsets topic (KIP-618: eases downgrades)."""

    def __init__(self, writer: OffsetWriter, copier: OffsetCopier) -> None:
        self.writer = writer
        self.copier = copier

    def write(self, records: Sequence[tuple[bytes, bytes | None]], timeout_s: float) -> None:
        self.writer.write(records, timeout_s)
        self.copier.copy(records)


class WorkerSourceTask(AbstractWorkerSourceTask):
    """At-least-once: offsets of acknowledged records, committed every
    ``offset.flush.interval.ms`` and when the loop ends."""

    def __init__(
        self,
        task_id: ConnectorTaskId,
        task: SourceTask,
        task_config: dict[str, str],
        *,
        key_converter: Converter,
        value_converter: Converter,
        chain: TransformationChain,
        sender: RecordSender,
        offset_writer: OffsetWriter,
        offsets: MemoryOffsetStore,
        errors: ErrorPolicy = NO_TOLERANCE,
        offset_flush_interval_ms: int = 60_000,
        offset_flush_timeout_ms: int = 5_000,
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
            commit_interval_ms=offset_flush_interval_ms,
            clock=clock,
            active_topics=active_topics,
        )
        self.offset_writer = offset_writer
        self.flush_timeout_s = offset_flush_timeout_ms / 1000
        self.submitted = SubmittedRecords()
        self._acked_since_commit: list[tuple[SourceRecord, RecordMetadata | None]] = []
        self._failed_offsets: dict[Any, tuple[Any, Any]] = {}

    # -- hooks ---------------------------------------------------------------------------

    def prepare_to_send_record(self, record: SourceRecord, out: OutgoingRecord) -> SubmittedRecord:
        return self.submitted.submit(record.source_partition, record.source_offset)

    def record_sent(
        self, record: SourceRecord, handle: SubmittedRecord, meta: RecordMetadata | None
    ) -> None:
        self.submitted.ack(handle)
        self._acked_since_commit.append((record, meta))

    def record_dropped(self, record: SourceRecord) -> None:
        # A dropped record's offset may be committed once earlier records are acknowledged;
        # the task hears of it at once (Kafka's WorkerSourceTask.recordDropped).
        self.submitted.ack(self.submitted.submit(record.source_partition, record.source_offset))
        self.task.commit_record(record, None)

    def batch_dispatched(self, records: Sequence[SourceRecord]) -> None:
        if self.clock() >= self._next_commit:
            self.commit_offsets()

    def send_error(self, error: Exception) -> Exception:
        return ConnectException(f"Unrecoverable exception from producer send callback: {error}")

    def final_offset_commit(self, failed: bool) -> bool:
        """Wait for outstanding sends and commit what was acknowledged, also after a
        failure: only acknowledged records' offsets are ever committed (Kafka's
        ``WorkerSourceTask.finalOffsetCommit``)."""
        self.sender.flush(self.flush_timeout_s)
        return self.commit_offsets()

    def release(self) -> None:
        if isinstance(self.offset_writer, CopyingOffsetWriter):
            self.offset_writer.copier.close(5.0)

    # -- offsets -------------------------------------------------------------------------

    def commit_offsets(self) -> bool:
        """Commit the offsets of acknowledged records; False if the write failed (the
        same offsets are retried at the next commit)."""
        self._next_commit = self.clock() + self.flush_interval_s
        acked, self._acked_since_commit = self._acked_since_commit, []
        committable = self.submitted.committable_offsets()
        # Offsets a failed commit left behind go first; newer ones replace them.
        pending = self._failed_offsets
        pending.update(
            {
                key: (committable.partitions[key], offset)
                for key, offset in committable.offsets.items()
            }
        )
        self._failed_offsets = {}
        if pending:
            records = [
                encode_offset(OffsetRecord(self.id.connector, dict(partition), dict(offset)))
                for partition, offset in pending.values()
            ]
            try:
                self.offset_writer.write(records, self.flush_timeout_s)
            except Exception as exc:
                log.error("%s: failed to commit offsets: %s", self.id, exc)
                self.metrics.offset_commit_failures += 1
                self._failed_offsets = pending
                self._acked_since_commit = acked + self._acked_since_commit
                return False
            self.offsets.commit({key: offset for key, (_, offset) in pending.items()})
            self.metrics.offset_commits += 1
        for record, meta in acked:
            self.task.commit_record(record, meta)
        self.task.commit()
        return True
