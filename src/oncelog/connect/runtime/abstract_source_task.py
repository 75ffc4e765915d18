"""What every source task loop does, as Kafka Connect's ``AbstractWorkerSourceTask``: poll
the task, transform and convert each record, send it, and hand the outcomes to hooks
that the delivery guarantee implements:

- :meth:`prepare_to_send_record` before a record is sent (returns what
  :meth:`record_sent` gets back once the record is acknowledged);
- :meth:`record_dropped` for a record a transform filtered or error tolerance skipped;
- :meth:`record_dispatched` after each record is handed to the producer, and
  :meth:`batch_dispatched` after each poll's records;
- :meth:`final_offset_commit` when the loop ends, then :meth:`release`.

``WorkerSourceTask`` (at-least-once: offsets of acknowledged records, flushed
periodically) and ``ExactlyOnceWorkerSourceTask`` (KIP-618: records and offsets in one
producer transaction) implement them; neither switches the other's parts off.
"""

from __future__ import annotations

import abc
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from oncelog.connect.api.connector import RecordMetadata, SourceRecord, SourceTask
from oncelog.connect.api.converters import Converter
from oncelog.connect.api.errors import RetriableException
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.error_handling import NO_TOLERANCE, ErrorPolicy
from oncelog.connect.runtime.task_context import BasicSourceTaskContext
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.storage.offsets import MemoryOffsetStore

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Exception | None, RecordMetadata | None], None]


class RecordSender(Protocol):
    """The task's producer, as the loop needs it."""

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


class AbstractWorkerSourceTask(abc.ABC):
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
        offsets: MemoryOffsetStore,
        errors: ErrorPolicy = NO_TOLERANCE,
        commit_interval_ms: int = 60_000,
        clock: Callable[[], float] = time.monotonic,
        active_topics: Callable[[str], None] = lambda topic: None,
    ) -> None:
        self.id = task_id
        self.task = task
        self.task_config = dict(task_config)
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.chain = chain
        self.sender = sender
        self.offsets = offsets
        self.errors = errors
        self.flush_interval_s = commit_interval_ms / 1000
        self.clock = clock
        # KIP-558: told the topic of every acknowledged record (``WorkerTask.recordActiveTopic``).
        self.active_topics = active_topics
        self.metrics = SourceTaskMetrics()
        self._send_error: Exception | None = None
        self._next_commit = 0.0

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.task.initialize(BasicSourceTaskContext(self.task_config, self.offsets, self.context()))
        self.task.start(self.task_config)
        self._next_commit = self.clock() + self.flush_interval_s

    def context(self) -> Any:
        """The task's TransactionContext (None unless connector-defined boundaries)."""
        return None

    def iterate(self) -> int:
        """One poll and its sends; returns the number of records polled."""
        if self._send_error is not None:
            raise self.send_error(self._send_error)
        try:
            records = self.task.poll() or []
        except RetriableException as exc:
            log.warning("%s: retriable error from poll(), will retry: %s", self.id, exc)
            records = []
        self.metrics.polled += len(records)
        for record in records:
            self._send(record)
            self.record_dispatched(record)
        self.sender.poll(0)
        self.batch_dispatched(records)
        return len(records)

    def stop(self) -> None:
        """Ask the task to stop (from another thread); ``iterate`` returns soon. A
        connector's failing ``stop`` is logged, never raised into the herder that asked
        (Kafka's ``AbstractWorkerSourceTask.tryStop``)."""
        try:
            self.task.stop()
        except Exception:
            log.exception("%s: the task failed to stop", self.id)

    def close(self, failed: bool = False) -> bool:
        """After the loop ended (``failed``: by an error): the final commit, then the
        loop's resources go."""
        try:
            return self.final_offset_commit(failed)
        finally:
            self.chain.close()
            self.release()

    def on_pause(self) -> None:  # noqa: B027 - optional hook
        """The connector was paused (on the task's thread; no poll until resumed)."""

    def on_resume(self) -> None:  # noqa: B027 - optional hook
        """The connector was resumed."""

    # -- records -------------------------------------------------------------------------

    def _convert(self, record: SourceRecord) -> OutgoingRecord | None:
        """Transform and convert ``record``; None when a transform filtered it or error
        tolerance skipped it (both go to :meth:`record_dropped`, as in Kafka)."""
        try:
            transformed = self.errors.retrying(lambda: self.chain.apply(record))
            if transformed is None:
                self.metrics.filtered += 1
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
            self.record_dropped(record)
            return
        handle = self.prepare_to_send_record(record, out)

        def delivered(error: Exception | None, meta: RecordMetadata | None) -> None:
            if error is not None:
                self._send_error = error  # the producer gave up: the task cannot go on
                return
            self.metrics.acked += 1
            self.record_sent(record, handle, meta)
            if meta is not None:
                self.active_topics(meta.topic)

        self.dispatch(out, delivered)
        self.metrics.sent += 1

    def dispatch(self, out: OutgoingRecord, on_delivery: DeliveryCallback) -> None:
        self.sender.send(
            out.topic,
            out.key,
            out.value,
            partition=out.partition,
            timestamp=out.timestamp,
            headers=out.headers,
            on_delivery=on_delivery,
        )

    # -- hooks ---------------------------------------------------------------------------

    @abc.abstractmethod
    def prepare_to_send_record(self, record: SourceRecord, out: OutgoingRecord) -> Any:
        """Before ``record`` is sent; what it returns comes back to :meth:`record_sent`."""

    @abc.abstractmethod
    def record_sent(self, record: SourceRecord, handle: Any, meta: RecordMetadata | None) -> None:
        """``record`` was acknowledged (on the producer's callback)."""

    @abc.abstractmethod
    def record_dropped(self, record: SourceRecord) -> None:
        """A transform filtered ``record`` or error tolerance skipped it."""

    def record_dispatched(self, record: SourceRecord) -> None:  # noqa: B027 - optional hook
        """After ``record`` (sent or dropped) went through the loop."""

    @abc.abstractmethod
    def batch_dispatched(self, records: Sequence[SourceRecord]) -> None:
        """After a poll's records went through the loop (commits that are due)."""

    @abc.abstractmethod
    def send_error(self, error: Exception) -> Exception:
        """What fails the task when a send failed for good."""

    @abc.abstractmethod
    def final_offset_commit(self, failed: bool) -> bool:
        """When the loop ends (``failed``: by an error): what is committed, if anything."""

    def release(self) -> None:  # noqa: B027 - optional hook
        """The loop's own resources, after the final commit."""
