"""The internal topics the coordinators own, and the narrow view of storage they get.

Services receive these protocol types instead of the broker, so ``txn``, ``group`` and
``coordinator`` never import ``oncelog.broker``, nor ``oncelog.storage.unified_log``: a
coordinator sees a partition as a :class:`CoordinatorLog` (Kafka's ``PartitionWriter``
plus the reads its loader makes), never the whole ``UnifiedLog``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from oncelog.records.batch import BatchHeader
from oncelog.storage.append_result import AppendResult
from oncelog.storage.group_sync import SyncableLog
from oncelog.storage.producer_state import ProducerEntry
from oncelog.storage.replay import LogBatch

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's default for offsets.topic.num.partitions and transaction.state.log.num.partitions.
DEFAULT_INTERNAL_PARTITIONS = 50
# Kafka's default for offsets.topic.segment.bytes and transaction.state.log.segment.bytes.
DEFAULT_INTERNAL_SEGMENT_BYTES = 104_857_600

TopicPartition = tuple[str, int]


def internal_topic_config(segment_bytes: int) -> dict[str, str]:
    """The configs an internal topic is created with (compacted, the configured segment
    size), as Kafka's coordinators create theirs."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}


def skip_undecodable(
    log: logging.Logger, topic: str, partition: int, offset: int, error: Exception
) -> None:
    """One record of an internal topic that cannot be decoded (a client write from before
    internal topics were closed, a bit flip): logged and skipped, never fatal at start-up."""
    log.warning(
        "skipping undecodable record in %s-%d at offset %d: %s", topic, partition, offset, error
    )


class CoordinatorLog(SyncableLog, Protocol):
    """One partition as a coordinator uses it: append its records and the markers it
    writes, read the producer facts a marker depends on, read batches to load."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(
        self,
        batch: bytearray | memoryview,
        header: BatchHeader,
        *,
        now_ms: int,
        coordinator: bool = False,
    ) -> AppendResult: ...

    def append_control(
        self, batch: bytearray, header: BatchHeader, *, now_ms: int
    ) -> AppendResult: ...

    def producer_entry(self, producer_id: int) -> ProducerEntry | None: ...

    def read_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[LogBatch]: ...


class PartitionLookup(Protocol):
    """Finds a local partition log (``None``: no such topic or partition)."""

    def partition(self, name: str, index: int) -> CoordinatorLog | None: ...


class InternalTopics(PartitionLookup, Protocol):
    def ensure_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> Sequence[CoordinatorLog]:
        """The topic's partition logs, creating the topic first if it does not exist. An
        existing topic keeps its own partition count, whatever ``partitions`` says."""
        ...

    def partition_count(self, name: str) -> int | None:
        """How many partitions topic ``name`` has (``None``: no such topic)."""
        ...


class AppendListener(Protocol):
    """Told after an append to ``(topic, partition)``: wakes long-polling fetches."""

    def notify(self, key: TopicPartition) -> None: ...
