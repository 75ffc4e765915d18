"""The worker's global offsets backing store (Kafka Connect's ``KafkaOffsetBackingStore``
in distributed mode): the offsets topic, its reader, its writer and the offsets read.
KIP-875 offset changes go through :meth:`OffsetStore.write`, read back at once."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.storage import offset_records
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.internal_log import InternalTopicReader, LogConsumer, LogRecord
from oncelog.connect.storage.offsets import OffsetsView

log = logging.getLogger(__name__)


class OffsetLogWriter(Protocol):
    def write(self, records: list[tuple[bytes | str, bytes | None]], timeout_s: float) -> None: ...


class OffsetStore:
    def __init__(
        self,
        consumer: LogConsumer,
        topic: str,
        cluster: ClusterState,
        writer: OffsetLogWriter,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.cluster = cluster
        self.writer = writer
        self.timeout_s = timeout_s
        self.reader = InternalTopicReader(consumer, topic, self._apply)

    @property
    def view(self) -> OffsetsView:
        return self.cluster.offsets_view

    def start(self) -> None:
        self.reader.start()
        self.reader.read_to_end(self.timeout_s)

    def _apply(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self.cluster.apply_offset(record.key, record.value)
        except ConnectException as exc:
            log.warning("ignoring offset record: %s", exc)

    def read_to_end(self, *, high_watermark: bool = False) -> None:
        """``high_watermark``: also wait for committed transactions whose markers are not
        written yet, and for open ones (after one's own transactional write, and for the
        REST API's reads, as Kafka's ``KafkaBasedLog``); the herder's reads before it
        starts tasks stop at the last stable offset, so a transaction left open by a dead
        worker does not hold them up."""
        self.reader.read_to_end(self.timeout_s, high_watermark=high_watermark)

    def poll(self, timeout_s: float) -> None:
        self.reader.poll(timeout_s)

    def write(self, connector: str, offsets: Mapping[Any, Mapping[str, Any] | None]) -> None:
        """Write ``connector``'s offsets (None erases a partition) and read them back."""
        records: list[tuple[bytes | str, bytes | None]] = [
            offset_records.encode(
                offset_records.OffsetRecord(
                    connector, dict(partition), None if offset is None else dict(offset)
                )
            )
            for partition, offset in offsets.items()
        ]
        self.writer.write(records, self.timeout_s)
        self.read_to_end(high_watermark=True)
