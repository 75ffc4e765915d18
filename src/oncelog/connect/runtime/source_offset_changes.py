"""KIP-875 changes to a source connector's offsets, written where its tasks read them
(Kafka's ``Worker.modifySourceConnectorOffsets`` and ``ConnectorOffsetBackingStore``).

- The connector's offsets live in its offsets topic (``offsets_topics``): the worker's
  global topic, or a separate one layered over it. Its current partitions are the union
  of both, and a change is written to the topic its tasks read first, with a copy in the
  global topic when that is a separate one.
- Tombstones go to the global topic first (KAFKA-15018), so a failure half-way never
  leaves a global offset that resurrects an erased one.
- With exactly-once support enabled, the caller has fenced the connector's previous
  task generation first (a round of zombie fencing); the change is then written in one
  transaction by a producer with the transactional id of the connector's task 0, whose
  initialization also fences that task's latest instance. A zombie task resumed after
  the change can therefore no longer commit offsets that would undo it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.runtime.offsets_topics import offsets_topic
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.runtime.worker_services import ClientFactory
from oncelog.connect.storage import offset_records
from oncelog.connect.storage.offsets import LayeredOffsetStore, OffsetsView, offsets_of

OffsetChanges = Mapping[Any, Mapping[str, Any] | None]
"""partition_key → new offset; None erases the partition's offset."""


class GlobalOffsets(Protocol):
    """The worker's global offsets topic and its view."""

    def write(self, connector: str, offsets: OffsetChanges) -> None: ...

    def read_to_end(self, *, high_watermark: bool = False) -> None: ...

    @property
    def view(self) -> OffsetsView: ...


class SourceOffsetChanges:
    def __init__(
        self,
        config: WorkerConfig,
        clients: ClientFactory,
        global_offsets: GlobalOffsets,
        timeout_s: float,
    ) -> None:
        self.config = config
        self.clients = clients
        self.global_offsets = global_offsets
        self.timeout_s = timeout_s

    def current(
        self, connector: str, connector_config: Mapping[str, str]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (partition, offset) the connector's tasks would read now: its separate
        topic's offsets over the global topic's (``LayeredOffsetStore``)."""
        self.global_offsets.read_to_end(high_watermark=True)
        topic = offsets_topic(self.config, connector_config)
        view = self.global_offsets.view.reader(connector)
        if topic.separate:
            layered = LayeredOffsetStore(view)
            separate = self.clients.separate_offsets(connector, topic.topic, connector_config)
            separate.ensure()
            separate.read(offsets_of(connector, layered), self.timeout_s)
            return [(dict(k), v) for k, v in layered.merged().items()]
        return [(dict(k), v) for k, v in view.snapshot().items()]

    def write(
        self, connector: str, connector_config: Mapping[str, str], changes: OffsetChanges
    ) -> None:
        if not changes:
            return
        topic = offsets_topic(self.config, connector_config)
        tombstones = {k: v for k, v in changes.items() if v is None}
        if topic.separate and tombstones:
            self.global_offsets.write(connector, tombstones)
        if self.config.exactly_once_source_enabled():
            self._write_transactionally(connector, connector_config, topic.topic, changes)
            if not topic.separate:
                self.global_offsets.read_to_end(high_watermark=True)
        elif topic.separate:
            writer = self.clients.separate_offset_writer(connector, topic.topic, connector_config)
            writer.write(_records(connector, changes), self.timeout_s)
        else:
            self.global_offsets.write(connector, changes)
        if topic.separate:
            kept = {k: v for k, v in changes.items() if v is not None}
            if kept:
                self.global_offsets.write(connector, kept)

    def _write_transactionally(
        self,
        connector: str,
        connector_config: Mapping[str, str],
        topic: str,
        changes: OffsetChanges,
    ) -> None:
        sender = self.clients.transactional_sender(connector, 0, connector_config)
        try:
            sender.init_transactions(self.timeout_s)
            sender.begin_transaction()
            sender.write(topic, _records(connector, changes))
            sender.commit_transaction(self.timeout_s)
        except ConnectException as exc:
            raise ConnectException(
                f"Failed to modify offsets for source connector {connector}: {exc}"
            ) from exc
        finally:
            sender.close()


def _records(connector: str, changes: OffsetChanges) -> list[tuple[bytes, bytes | None]]:
    return [
        offset_records.encode(
            offset_records.OffsetRecord(
                connector, dict(partition), None if offset is None else dict(offset)
            )
        )
        for partition, offset in changes.items()
    ]
