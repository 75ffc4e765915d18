"""Connector configs held in memory: standalone mode's config store (Kafka Connect's
``MemoryConfigBackingStore``). Records go through the same state machine as the config
topic's (``config_state``), so the herder reads snapshots and events alike in both
modes."""

from __future__ import annotations

import threading

from oncelog.connect.storage import config_records
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_records import ConfigRecord
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigEvent


class MemoryConfigStore:
    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.cluster.config.caught_up = True
        self._lock = threading.Lock()
        self._offset = 0
        self._events: list[ConfigEvent] = []

    def write(self, records: list[ConfigRecord]) -> None:
        with self._lock:
            for record in records:
                key, value = config_records.encode(record)
                self._events.extend(self.cluster.apply_config(self._offset, key, value))
                self._offset += 1

    def snapshot(self) -> ClusterConfigSnapshot:
        return self.cluster.snapshot()

    def take_events(self) -> list[ConfigEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events
