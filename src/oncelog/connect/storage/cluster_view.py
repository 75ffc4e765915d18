"""A worker's view of its three internal topics, fed record by record by the topic
readers; what the REST API and the herder read."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from oncelog.connect.storage import config_records, offset_records, status_records
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigEvent, ConfigState
from oncelog.connect.storage.offsets import OffsetsView
from oncelog.connect.storage.status_state import StatusState


@dataclass
class ClusterState:
    config: ConfigState = field(default_factory=ConfigState)
    status: StatusState = field(default_factory=StatusState)
    offsets_view: OffsetsView = field(default_factory=OffsetsView)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply_config(self, offset: int, key: bytes | str, value: bytes | None) -> list[ConfigEvent]:
        record = config_records.decode(key, value)
        with self.lock:
            return self.config.apply(offset, record)

    def apply_status(self, key: bytes | str, value: bytes | None) -> None:
        record = status_records.decode(key, value)
        with self.lock:
            self.status.apply(record)

    def apply_offset(self, key: bytes, value: bytes | None) -> None:
        record = offset_records.decode(key, value)
        with self.lock:
            self.offsets_view.apply(record)

    # -- ClusterView ---------------------------------------------------------------------

    def snapshot(self) -> ClusterConfigSnapshot:
        with self.lock:
            return self.config.snapshot()

    def statuses(self) -> StatusState:
        return self.status

    def offsets(self) -> OffsetsView:
        return self.offsets_view
