"""The status backing store (Kafka Connect's ``KafkaStatusBackingStore``): the status
topic, its reader, its writer and the statuses read from it.

- ``put`` writes unconditionally; ``put_safe`` only when Kafka's ``putSafe`` allows it
  (nothing stored, same worker, or a newer generation), so a worker that lost a task
  in a rebalance cannot overwrite its new owner's status.
- A DESTROYED status is written as a tombstone (the leader's clean-up of deleted
  connectors and tasks, ``DistributedHerder.updateDeletedConnectorStatus`` and
  ``updateDeletedTaskStatus``).
- KIP-558 active topics: ``record_active_topic`` writes a topic status once per
  (connector, topic) until a reset deletes it (``WorkerTask.recordActiveTopic``).
  A topic written but not yet read back is not written again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.storage import status_records
from oncelog.connect.storage.internal_log import InternalTopicReader, LogConsumer, LogRecord
from oncelog.connect.storage.status_records import (
    ConnectorStatus,
    State,
    StatusRecord,
    StatusTombstone,
    TaskStatus,
    TopicStatus,
)
from oncelog.connect.storage.status_state import StatusState

log = logging.getLogger(__name__)


class StatusWriter(Protocol):
    def send(self, key: bytes | str, value: bytes | None) -> None: ...

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        """Write and wait for the acknowledgements."""

    def flush(self, timeout_s: float) -> int: ...


class StatusStore:
    def __init__(
        self,
        consumer: LogConsumer | None,
        topic: str,
        writer: StatusWriter | None,
        state: StatusState,
        lock: threading.Lock | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        """``consumer`` and ``writer`` None: no topic (standalone mode keeps statuses in
        memory, as Kafka's ``MemoryStatusBackingStore``: a write is applied at once)."""
        self.topic = topic
        self.writer = writer
        self.state = state
        self.timeout_s = timeout_s
        self._lock = lock or threading.Lock()
        self.reader = (
            None if consumer is None else InternalTopicReader(consumer, topic, self._record)
        )
        self._topics_in_flight: set[tuple[str, str]] = set()
        self.version = 0  # records applied so far: the leader cleans when it moves on

    # -- reading (the topic reader feeds every record here) ---------------------------------

    def start(self) -> None:
        if self.reader is not None:
            self.reader.start()
            self.reader.read_to_end(self.timeout_s)

    def poll(self, timeout_s: float) -> None:
        if self.reader is not None:
            self.reader.poll(timeout_s)

    def _record(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self.apply(record.key, record.value)
        except ConnectException as exc:
            log.warning("ignoring status record: %s", exc)

    def apply(self, key: bytes | str, value: bytes | None) -> None:
        record = status_records.decode(key, value)
        with self._lock:
            self.version += 1
            self.state.apply(record)
            if isinstance(record, TopicStatus):
                self._topics_in_flight.discard((record.connector, record.topic))

    # -- writing ----------------------------------------------------------------------------

    def put(self, status: ConnectorStatus | TaskStatus) -> None:
        if status.state is State.DESTROYED:
            self._send(StatusTombstone(status.connector, getattr(status, "task", None)))
            return
        self._send(status)

    def put_safe(self, status: ConnectorStatus | TaskStatus) -> None:
        with self._lock:
            allowed = self.state.can_write_safely(status)
        if allowed:
            self.put(status)

    def record_active_topic(self, connector: str, task: int, topic: str, now_ms: int) -> None:
        """Called for every record a task sends or consumes: cheap when already recorded."""
        key = (connector, topic)
        with self._lock:
            if topic in self.state.topics.get(connector, {}) or key in self._topics_in_flight:
                return
            self._topics_in_flight.add(key)
        self._send(TopicStatus(topic, connector, task, now_ms))

    def reset_active_topics(self, connector: str, timeout_s: float) -> None:
        """``PUT /connectors/{c}/topics/reset``: tombstone every topic of ``connector``."""
        with self._lock:
            topics = sorted(self.state.topics.get(connector, {}))
            for topic in topics:
                self._topics_in_flight.discard((connector, topic))
        self.write([StatusTombstone(connector, topic=t) for t in topics], timeout_s)

    def write(self, records: Iterable[StatusRecord], timeout_s: float) -> None:
        encoded = [status_records.encode(r) for r in records]
        if self.writer is None:
            for key, value in encoded:
                self.apply(key, value)
        elif encoded:
            self.writer.write(encoded, timeout_s)

    def _send(self, record: StatusRecord) -> None:
        if self.writer is None:
            self.apply(*status_records.encode(record))
        else:
            self.writer.send(*status_records.encode(record))

    def flush(self, timeout_s: float) -> None:
        if self.writer is not None:
            self.writer.flush(timeout_s)

    # -- the leader's clean-up ----------------------------------------------------------------

    def deleted(
        self, connectors: Callable[[], Iterable[str]], tasks_of: Callable[[str], Iterable[int]]
    ) -> list[StatusTombstone]:
        """Tombstones for the statuses of connectors and tasks no longer configured
        (``connectors``: the configured connectors; ``tasks_of``: a connector's task
        numbers), with the topics of deleted connectors."""
        configured = set(connectors())
        out: list[StatusTombstone] = []
        with self._lock:
            stored_connectors = set(self.state.connectors) | {c for c, _ in self.state.tasks}
            for connector in sorted(stored_connectors):
                live = set(tasks_of(connector)) if connector in configured else set()
                out += [
                    StatusTombstone(connector, task)
                    for (c, task) in sorted(self.state.tasks)
                    if c == connector and task not in live
                ]
                if connector not in configured and connector in self.state.connectors:
                    out.append(StatusTombstone(connector))
            for connector in sorted(set(self.state.topics) - configured):
                out += [
                    StatusTombstone(connector, topic=t)
                    for t in sorted(self.state.topics[connector])
                ]
        return out
