"""Committed offsets of a consumer group that never has members, read and written as
plain OffsetFetch / OffsetCommit (with offset metadata) through a librdkafka consumer that
never subscribes. The group is a small durable key-value store (the Spark sink keeps its
commit decisions in one); Kafka's GroupCoordinator accepts such commits as it does Java's
``KafkaConsumer.commitSync(offsets)`` without ``subscribe``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oncelog.client.config import ClientConfig
from oncelog.client.errors import call, from_kafka_error


@dataclass(frozen=True, slots=True)
class Committed:
    partition: int
    offset: int  # -1: nothing committed (or the topic lacks the partition)
    metadata: str | None


class MemberlessGroup:
    """One group's committed offsets. The consumer is created on first use."""

    def __init__(self, config: ClientConfig, group_id: str, *, timeout: float = 30.0) -> None:
        self.config = config
        self.group_id = group_id
        self.timeout = timeout
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(
                {
                    "enable.sparse.connections": False,
                    **self.config.librdkafka(),
                    "group.id": self.group_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                }
            )
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def committed(self, topic: str, partitions: Sequence[int]) -> list[Committed]:
        """OffsetFetch; a partition the topic lacks (or an unknown topic) reads as -1.
        Raises a ClientError (by Kafka error code) otherwise."""
        from confluent_kafka import KafkaError, TopicPartition

        tps = call(
            f"OffsetFetch of group {self.group_id!r}",
            self._client().committed,
            [TopicPartition(topic, p) for p in partitions],
            timeout=self.timeout,
        )
        out = []
        for tp in tps:
            if tp.error is not None:
                if tp.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise from_kafka_error(tp.error, f"OffsetFetch of {topic}-{tp.partition}")
                out.append(Committed(tp.partition, -1, None))
            else:
                out.append(Committed(tp.partition, tp.offset, tp.metadata))
        return out

    def commit(self, topic: str, offsets: Mapping[int, tuple[int, str]]) -> None:
        """OffsetCommit of {partition: (offset, metadata)}, synchronously; a ClientError
        (by Kafka error code) when the commit or any partition of it failed."""
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(topic, p, o, metadata=m) for p, (o, m) in offsets.items()]
        result = call(
            f"OffsetCommit of group {self.group_id!r}",
            self._client().commit,
            offsets=tps,
            asynchronous=False,
        )
        for tp in result or []:
            if tp.error is not None:
                raise from_kafka_error(tp.error, f"OffsetCommit of {topic}-{tp.partition}")
