"""The loop that runs one source task (at-least-once delivery).

Each iteration polls the task, passes every record through the transformation chain
and the converters, and hands it to the producer. Offsets are committed every
``offset.flush.interval.ms``, and only for records the producer acknowledged with
every earlier record of the same source partition (:mod:`submitted_records`). A
commit writes the offsets to the offsets topic, waits for the write, updates the
task's offset view and calls ``SourceTask.commit()``. A crash between producing
and committing replays records, never skips them.

Producing and offset writing go through two small interfaces (:class:`RecordSender`,
:class:`OffsetWriter`) that the client layer's producer implements, so this loop
holds no client code. The exactly-once variant (``exactly_once_source_task``) reuses
the conversion and replaces the commit step by a transaction that holds the records
and their offsets.

Error handling follows ``errors.tolerance``: with ``none`` a failing transform or
conversion fails the task; with ``all`` the record is skipped (and logged with
``errors.log.enable``), and counted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from oncelog.connect.api.connector import RecordMetadata, SourceRecord, SourceTask
from oncelog.connect.api.converters import Converter
from oncelog.connect.api.errors import ConnectException, RetriableException
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.error_handling import NO_TOLERANCE, ErrorPolicy
from oncelog.connect.runtime.submitted_records import SubmittedRecord, SubmittedRecords
from oncelog.connect.runtime.task_context import BasicSourceTaskContext
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.storage.offset_records import OffsetRecord
from oncelog.connect.storage.offset_records import encode as encode_offset
from oncelog.connect.storage.offsets import MemoryOffsetStore

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Exception | None, RecordMetadata | None], None]


class RecordSender(Protocol):
    """The task's producer."""

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None,
        timestamp: int | None,
        headers: Sequence[tuple[str, bytes | None]],
        on_delivery: DeliveryCallback,
    ) -> None: ...

    def poll(self, timeout_s: float) -> None:
        """Serve delivery callbacks."""

    def flush(self, timeout_s: float) -> int:
        """Wait for outstanding sends; returns how many are still outstanding."""


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


@dataclass
class SourceTaskMetrics:
    polled: int = 0
    sent: int = 0
    acked: int = 0
    filtered: int = 0
    skipped_errors: int = 0
    offset_commits: int = 0
    offset_commit_failures: int = 0


@dataclass(frozen=True)
class OutgoingRecord:
    """A source record after the transformation chain and the converters."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: list[tuple[str, bytes | None]]


def header_bytes(value: Any) -> bytes | None:
    """Header values on the wire until a header converter exists: bytes as they are,
    strings as UTF-8, anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=str).encode()


class WorkerSourceTask:
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
        self.id = task_id
        # KIP-558: told the topic of every acknowledged record (``WorkerTask.recordActiveTopic``).
        self.active_topics = active_topics
        self.task = task
        self.task_config = dict(task_config)
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.chain = chain
        self.sender = sender
        self.offset_writer = offset_writer
        self.offsets = offsets
        self.errors = errors
        self.flush_interval_s = offset_flush_interval_ms / 1000
        self.flush_timeout_s = offset_flush_timeout_ms / 1000
        self.clock = clock
        self.submitted = SubmittedRecords()
        self.metrics = SourceTaskMetrics()
        self._acked_since_commit: list[tuple[SourceRecord, RecordMetadata | None]] = []
        self._send_error: Exception | None = None
        self._next_commit = 0.0
        self._failed_offsets: dict[Any, tuple[Any, Any]] = {}

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.task.initialize(BasicSourceTaskContext(self.task_config, self.offsets))
        self.task.start(self.task_config)
        self._next_commit = self.clock() + self.flush_interval_s

    def iterate(self) -> int:
        """One poll and its sends; commits offsets when the interval is due. Returns
        the number of records polled."""
        if self._send_error is not None:
            raise ConnectException(
                f"Unrecoverable exception from producer send callback: {self._send_error}"
            )
        try:
            records = self.task.poll() or []
        except RetriableException as exc:
            log.warning("%s: retriable error from poll(), will retry: %s", self.id, exc)
            records = []
        self.metrics.polled += len(records)
        for record in records:
            self._send(record)
        self.sender.poll(0)
        if self.clock() >= self._next_commit:
            self.commit_offsets()
        return len(records)

    def stop(self) -> None:
        """Ask the task to stop (from another thread); ``iterate`` returns soon."""
        self.task.stop()

    def close(self) -> bool:
        """After the loop ended: wait for outstanding sends and commit what was acknowledged."""
        self.sender.flush(self.flush_timeout_s)
        committed = self.commit_offsets()
        self.chain.close()
        if isinstance(self.offset_writer, CopyingOffsetWriter):
            self.offset_writer.copier.close(5.0)
        return committed

    # -- records -------------------------------------------------------------------------

    def _convert(self, record: SourceRecord) -> OutgoingRecord | None:
        """Transform and convert ``record``; None when a transform filtered it (then
        ``commit_record`` is called at once) or error tolerance skipped it."""
        try:
            transformed = self.errors.retrying(lambda: self.chain.apply(record))
            if transformed is None:
                self.metrics.filtered += 1
                self.task.commit_record(record, None)
                return None
            out = transformed
            key = self.errors.retrying(
                lambda: self.key_converter.from_connect_data(out.topic, out.key_schema, out.key)
            )
            value = self.errors.retrying(
                lambda: self.value_converter.from_connect_data(
                    out.topic, out.value_schema, out.value
                )
            )
            headers = [(h.key, header_bytes(h.value)) for h in transformed.headers]
        except Exception as exc:
            self.errors.tolerate(self.id, exc, record)
            self.metrics.skipped_errors += 1
            return None
        return OutgoingRecord(
            transformed.topic,
            transformed.kafka_partition,
            key,
            value,
            transformed.timestamp,
            headers,
        )

    def _send(self, record: SourceRecord) -> None:
        out = self._convert(record)
        if out is None:
            self._track_dropped(record)
            return
        handle = self.submitted.submit(record.source_partition, record.source_offset)
        self.sender.send(
            out.topic,
            out.key,
            out.value,
            partition=out.partition,
            timestamp=out.timestamp,
            headers=out.headers,
            on_delivery=lambda err, meta: self._delivered(record, handle, err, meta),
        )
        self.metrics.sent += 1

    def _track_dropped(self, record: SourceRecord) -> None:
        # A dropped record's offset may be committed once earlier records are acknowledged.
        handle = self.submitted.submit(record.source_partition, record.source_offset)
        self.submitted.ack(handle)

    def _delivered(
        self,
        record: SourceRecord,
        handle: SubmittedRecord,
        error: Exception | None,
        meta: RecordMetadata | None,
    ) -> None:
        if error is not None:
            # The idempotent producer retried until its deadline: the task cannot go on.
            self._send_error = error
            return
        self.metrics.acked += 1
        self.submitted.ack(handle)
        self._acked_since_commit.append((record, meta))
        if meta is not None:
            self.active_topics(meta.topic)

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
