"""What a worker needs from outside: the Kafka clients of its tasks (built by the client
adapters of ``kafka_io``, or standalone's file-backed offsets) and a sink for the
statuses it reports (the status backing store)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from oncelog.connect.runtime.abstract_source_task import RecordSender
from oncelog.connect.runtime.exactly_once_source_task import (
    TransactionalSender,
)
from oncelog.connect.runtime.worker_sink_task import (
    DeadLetterSender,
    SinkRecordSource,
)
from oncelog.connect.runtime.worker_source_task import OffsetCopier, OffsetWriter
from oncelog.connect.storage.internal_log import LogRecord
from oncelog.connect.storage.status_records import ConnectorStatus, TaskStatus


class ClientFactory(Protocol):
    def record_sender(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> RecordSender: ...

    def offset_writer(self, connector: str) -> OffsetWriter: ...

    def sink_source(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> SinkRecordSource: ...

    def dead_letter_sender(self, connector: str, topic: str) -> DeadLetterSender: ...

    # Exactly-once sources and separate offsets topics (KIP-618).
    def transactional_sender(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> TransactionalSender: ...

    def separate_offset_writer(
        self, connector: str, topic: str, connector_config: Mapping[str, str]
    ) -> OffsetWriter: ...

    def global_offset_copier(self) -> OffsetCopier: ...

    def read_global_offsets(
        self,
        connector: str,
        connector_config: Mapping[str, str],
        apply: Callable[[LogRecord], None],
        timeout_s: float,
    ) -> None:
        """Read the worker's global offsets topic to its end with the connector's
        consumer (its principal and ``consumer.override.*``), read_committed."""

    def separate_offsets(
        self, connector: str, topic: str, connector_config: Mapping[str, str]
    ) -> SeparateOffsets: ...


class StatusSink(Protocol):
    """Where the worker reports statuses (the status backing store). As Kafka's
    ``AbstractHerder`` listeners: a start, pause or resume is ``put``; a failure or a
    shutdown is ``put_safe``, so a worker that lost the task cannot overwrite its new
    owner's status."""

    def put(self, status: ConnectorStatus | TaskStatus) -> None: ...

    def put_safe(self, status: ConnectorStatus | TaskStatus) -> None: ...

    def record_active_topic(self, connector: str, task: int, topic: str, now_ms: int) -> None: ...


class SeparateOffsets(Protocol):
    """A connector's separate offsets topic."""

    def ensure(self) -> None:
        """Create it (compacted) if missing."""

    def read(self, apply: Callable[[LogRecord], None], timeout_s: float) -> None:
        """Apply every record up to its end (read_committed)."""
