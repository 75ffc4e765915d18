"""The internal topics the coordinators own, and the narrow view of storage they get.

Services receive these protocol types instead of the broker, so ``txn``, ``group`` and
``coordinator`` never import ``oncelog.broker``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from oncelog.storage.log import PartitionLog

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's default for offsets.topic.num.partitions and transaction.state.log.num.partitions.
DEFAULT_INTERNAL_PARTITIONS = 50
INTERNAL_TOPIC_CONFIG: Mapping[str, str] = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
}

TopicPartition = tuple[str, int]


class PartitionLookup(Protocol):
    """Finds a local partition log (``None``: no such topic or partition)."""

    def partition(self, name: str, index: int) -> PartitionLog | None: ...


class InternalTopics(PartitionLookup, Protocol):
    def ensure_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], *, now_ms: int
    ) -> Sequence[PartitionLog]:
        """The topic's partition logs, creating the topic first if it does not exist."""
        ...


class AppendListener(Protocol):
    """Told after an append to ``(topic, partition)``: wakes long-polling fetches."""

    def notify(self, key: TopicPartition) -> None: ...
