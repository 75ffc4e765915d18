"""Records that flow between tasks, transforms and converters.

:class:`SourceRecord` carries a source partition and offset (JSON-able dicts the
framework stores in the offsets topic); :class:`SinkRecord` carries the Kafka
coordinates it was consumed from. Both are immutable: transforms derive new
records with :meth:`ConnectRecord.new_record`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

from oncelog.connect.api.data import Schema


@dataclass(frozen=True)
class Header:
    key: str
    value: Any
    schema: Schema | None = None


@dataclass(frozen=True)
class Headers:
    """An ordered, immutable list of headers; keys may repeat, as in Kafka."""

    items: tuple[Header, ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[Header | tuple[str, Any]] = ()) -> Headers:
        return cls(tuple(p if isinstance(p, Header) else Header(p[0], p[1]) for p in pairs))

    def add(self, key: str, value: Any, schema: Schema | None = None) -> Headers:
        return Headers((*self.items, Header(key, value, schema)))

    def without(self, key: str) -> Headers:
        return Headers(tuple(h for h in self.items if h.key != key))

    def last_with_name(self, key: str) -> Header | None:
        for header in reversed(self.items):
            if header.key == key:
                return header
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self.items if h.key == key]

    def __iter__(self) -> Iterator[Header]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class TimestampType(enum.Enum):
    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class RecordMetadata:
    """What the producer acknowledged for a source record (given to ``commit_record``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


@dataclass(frozen=True)
class ConnectRecord:
    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: Headers = field(default_factory=Headers)

    def new_record(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (any of the record's fields)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class SourceRecord(ConnectRecord):
    """A record produced by a :class:`~oncelog.connect.api.connector.SourceTask`.

    ``source_partition`` and ``source_offset`` must be JSON-serialisable maps (Kafka
    Connect stores them as JSON in the offsets topic).
    """

    source_partition: Mapping[str, Any] | None = None
    source_offset: Mapping[str, Any] | None = None

    @classmethod
    def create(
        cls,
        source_partition: Mapping[str, Any] | None,
        source_offset: Mapping[str, Any] | None,
        topic: str,
        value: Any,
        *,
        value_schema: Schema | None = None,
        key: Any = None,
        key_schema: Schema | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
    ) -> SourceRecord:
        return cls(
            topic,
            partition,
            key_schema,
            key,
            value_schema,
            value,
            timestamp,
            headers or Headers(),
            source_partition,
            source_offset,
        )


@dataclass(frozen=True)
class SinkRecord(ConnectRecord):
    """A record consumed from Kafka and handed to a :class:`~oncelog.connect.api.connector.SinkTask`.

    ``original_*`` keep the coordinates the record was consumed from, even after
    transforms changed topic or partition (KIP-793): offsets are committed for those.
    """

    kafka_offset: int = -1
    timestamp_type: TimestampType = TimestampType.NO_TIMESTAMP_TYPE
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    def __post_init__(self) -> None:
        if self.original_topic is None:
            object.__setattr__(self, "original_topic", self.topic)
        if self.original_kafka_partition is None:
            object.__setattr__(self, "original_kafka_partition", self.kafka_partition)
        if self.original_kafka_offset is None:
            object.__setattr__(self, "original_kafka_offset", self.kafka_offset)

    @classmethod
    def create(
        cls,
        topic: str,
        partition: int,
        offset: int,
        value: Any,
        *,
        value_schema: Schema | None = None,
        key: Any = None,
        key_schema: Schema | None = None,
        timestamp: int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        headers: Headers | None = None,
    ) -> SinkRecord:
        return cls(
            topic,
            partition,
            key_schema,
            key,
            value_schema,
            value,
            timestamp,
            headers or Headers(),
            offset,
            timestamp_type,
        )

    @property
    def original_topic_partition(self) -> TopicPartition:
        assert self.original_topic is not None and self.original_kafka_partition is not None
        return TopicPartition(self.original_topic, self.original_kafka_partition)
