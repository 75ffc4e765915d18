"""The config backing store (Kafka Connect's ``KafkaConfigBackingStore``): the config
topic, its reader, its writer and the cluster configuration read from it.

The reader feeds every record to the configuration state (``config_state``) and keeps
the events that call for action until the herder takes them. The writer
(``config_writer``) reads each write back before returning, so a caller acts on what
the topic holds. A failed privileged write (a newer leader fenced this one, KIP-618)
is remembered until the herder takes it and rejoins the group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigEvent
from oncelog.connect.storage.config_writer import ConfigWriter, LogWriter, PrivilegedLogWriter
from oncelog.connect.storage.internal_log import InternalTopicReader, LogConsumer, LogRecord

log = logging.getLogger(__name__)


class ConfigStore:
    def __init__(
        self,
        consumer: LogConsumer,
        topic: str,
        cluster: ClusterState,
        plain: LogWriter,
        privileged: Callable[[], PrivilegedLogWriter] | None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.reader = InternalTopicReader(consumer, topic, self._apply)
        self.writer = ConfigWriter(
            plain,
            privileged,
            self.read_to_end,
            cluster.snapshot,
            on_write_failure=self._write_failed,
            timeout_s=timeout_s,
        )
        self._events: list[ConfigEvent] = []
        self._fenced = False

    def start(self) -> None:
        """Read the topic to its end; older restart requests are not events."""
        self.reader.start()
        self.reader.read_to_end(self.timeout_s)
        self.cluster.config.caught_up = True
        self._events.clear()

    def _apply(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self._events.extend(self.cluster.apply_config(record.offset, record.key, record.value))
        except ConnectException as exc:
            log.warning("ignoring config record at %d: %s", record.offset, exc)

    def _write_failed(self) -> None:
        self._fenced = True

    def read_to_end(self) -> None:
        self.reader.read_to_end(self.timeout_s)

    def poll(self, timeout_s: float) -> None:
        self.reader.poll(timeout_s)

    def snapshot(self) -> ClusterConfigSnapshot:
        return self.cluster.snapshot()

    def take_events(self) -> list[ConfigEvent]:
        events, self._events = self._events, []
        return events

    def drop_events(self) -> None:
        """After a rebalance, whose plan covers whatever they said."""
        self._events.clear()

    def take_write_failure(self) -> bool:
        fenced, self._fenced = self._fenced, False
        return fenced
