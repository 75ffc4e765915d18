"""confluent-kafka's consumer behind the client layer (Kafka's ``KafkaConsumer``): assigned
or subscribed, for the CLI, the demo, the test harness and the Connect worker.

librdkafka does the work; this module keeps its types out of the callers. Records come
out as :class:`Record`; the events librdkafka interleaves with them come out apart, in a
:class:`Polled`: a partition's end (``enable.partition.eof``) and errors, as
:class:`~oncelog.client.errors.ClientError` by Kafka error code
(:func:`~oncelog.client.errors.from_kafka_error`). Failed calls raise a ClientError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oncelog.client.config import ClientConfig
from oncelog.client.errors import LOCAL_PARTITION_EOF, ClientError, call, from_kafka_error

TopicPartition = tuple[str, int]
# librdkafka's logical offsets (Kafka's ListOffsets timestamps: -2 earliest, -1 latest).
BEGINNING, END = -2, -1
# librdkafka's timestamp types -> Kafka's TimestampType names (None: NO_TIMESTAMP_TYPE).
_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class Record:
    """A consumed record (Java's ``ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms since the epoch; -1 when the record has none
    timestamp_type: str | None  # CreateTime, LogAppendTime; None: NO_TIMESTAMP_TYPE
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """A partition's end was reached (``enable.partition.eof``): ``offset`` is the next."""

    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class Polled:
    """What one :meth:`KafkaConsumer.consume` returned, records and events apart."""

    records: list[Record] = field(default_factory=list)
    ends: list[PartitionEnd] = field(default_factory=list)
    errors: list[ClientError] = field(default_factory=list)


AssignmentCallback = Callable[[list[TopicPartition]], None]


class KafkaConsumer:
    """One librdkafka consumer. ``conf`` is librdkafka's configuration with
    ``bootstrap.servers`` and ``group.id``. A configuration librdkafka refuses raises a
    ClientError."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        from confluent_kafka import Consumer

        self._consumer = call("creating a consumer", Consumer, dict(conf))

    @classmethod
    def of(cls, config: ClientConfig, **settings: Any) -> KafkaConsumer:
        """A consumer of the cluster ``config`` reaches, with these librdkafka settings."""
        return cls(config.librdkafka(**settings))

    # -- what to read ----------------------------------------------------------------------
    def partitions(self, topic: str, timeout_s: float) -> list[int] | None:
        """The topic's partitions from Metadata, None when the topic is unknown or failed."""
        md = call(f"Metadata of {topic}", self._consumer.list_topics, topic, timeout=timeout_s)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        return sorted(meta.partitions)

    def assign(self, positions: Iterable[tuple[str, int, int]]) -> None:
        """Read these (topic, partition, offset) (:data:`BEGINNING`, :data:`END` or an
        offset), outside any group's assignment."""
        from confluent_kafka import TopicPartition as KTP

        call("assign", self._consumer.assign, [KTP(t, p, o) for t, p, o in positions])

    def subscribe(
        self,
        topics: list[str],
        on_assign: AssignmentCallback | None = None,
        on_revoke: AssignmentCallback | None = None,
    ) -> None:
        """Join the group for these topics (a name starting with ``^`` is a regular
        expression); the callbacks get the (topic, partition) assigned or revoked."""
        kwargs: dict[str, Any] = {}
        if on_assign is not None:
            kwargs["on_assign"] = lambda _c, parts: on_assign(_tps(parts))
        if on_revoke is not None:
            kwargs["on_revoke"] = lambda _c, parts: on_revoke(_tps(parts))
        call("subscribe", self._consumer.subscribe, topics, **kwargs)

    # -- reading -----------------------------------------------------------------------------
    def consume(self, max_records: int, timeout_s: float) -> Polled:
        """Up to ``max_records`` records, waiting at most ``timeout_s`` for the first."""
        messages: list[Any] = call("consume", self._consumer.consume, max_records, timeout_s)
        out = Polled()
        records = out.records
        for m in messages:
            err = m.error()
            if err is None:
                ts_type, ts = m.timestamp()
                records.append(
                    Record(
                        m.topic(),
                        m.partition(),
                        m.offset(),
                        m.key(),
                        m.value(),
                        ts,
                        _TIMESTAMP_TYPES.get(ts_type),
                        tuple(m.headers() or ()),
                    )
                )
            elif err.code() == LOCAL_PARTITION_EOF:
                out.ends.append(PartitionEnd(m.topic(), m.partition() or 0, m.offset() or 0))
            else:
                where = f"{m.topic()}-{m.partition()}" if m.topic() else "the cluster"
                out.errors.append(from_kafka_error(err, f"Fetch from {where}"))
        return out

    def seek(self, topic: str, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition as KTP

        call("seek", self._consumer.seek, KTP(topic, partition, offset))

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition as KTP

        call("pause", self._consumer.pause, [KTP(t, p) for t, p in tps])

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition as KTP

        call("resume", self._consumer.resume, [KTP(t, p) for t, p in tps])

    def positions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset of the next record each partition will return."""
        from confluent_kafka import TopicPartition as KTP

        found = call("position", self._consumer.position, [KTP(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def end_offsets(
        self, tps: Iterable[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int]:
        """ListOffsets at the end (timestamp -1) of every partition in one request, under
        this consumer's isolation level; the first partition's error raises its ClientError."""
        from confluent_kafka import TopicPartition as KTP

        found = call(
            "ListOffsets",
            self._consumer.offsets_for_times,
            [KTP(t, p, END) for t, p in tps],
            timeout=timeout_s,
        )
        for tp in found:
            if tp.error is not None:
                raise from_kafka_error(tp.error, f"ListOffsets of {tp.topic}-{tp.partition}")
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit of these offsets for the group, waiting for the answer."""
        from confluent_kafka import TopicPartition as KTP

        call(
            "OffsetCommit",
            self._consumer.commit,
            offsets=[KTP(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )

    def close(self) -> None:
        """Leave the group (if subscribed) and release the consumer."""
        call("close", self._consumer.close)


def _tps(parts: list[Any]) -> list[TopicPartition]:
    return [(p.topic, p.partition) for p in parts]
