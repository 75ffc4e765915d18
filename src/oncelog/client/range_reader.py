"""Reading one offset range of one partition with an *assigned* librdkafka consumer: no
group membership, no offset commits (the caller keeps its own positions, as Spark's
checkpoint does).

Under ``read_committed`` the end of a range is at most the last stable offset; librdkafka
drops aborted records and control markers, so a range whose last offsets are a marker or
aborted records still completes: the read stops at the first record at or beyond ``end``,
at the record ``end - 1``, or at a partition-EOF event at or beyond ``end``.

Records come out in :class:`RecordChunk` columns (Python lists built once per chunk), which
callers turn into their own format (the Spark source: Arrow record batches).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from oncelog.client.errors import ClientError, call, from_kafka_error

# confluent-kafka timestamp types -> Kafka's TimestampType ids (NO_TIMESTAMP_TYPE = -1,
# CREATE_TIME = 0, LOG_APPEND_TIME = 1), as Java's ConsumerRecord reports them.
_TS_TYPE = {0: -1, 1: 0, 2: 1}


class OffsetOutOfRange(ClientError):
    """The range's start is gone from the log (retention, a deleted or recreated topic):
    OFFSET_OUT_OF_RANGE, or librdkafka's auto.offset.reset=error."""


@dataclass(frozen=True, slots=True)
class RecordChunk:
    """Records of one partition in offset order, column by column."""

    keys: list[bytes | None]
    values: list[bytes | None]
    offsets: list[int]
    timestamps: list[int]  # ms since the epoch
    timestamp_types: list[int]  # Kafka's TimestampType ids
    headers: list[list[tuple[str, bytes | None]] | None] | None  # None: not asked for

    def __len__(self) -> int:
        return len(self.offsets)


def _chunk(msgs: list[Any], with_headers: bool) -> RecordChunk:
    stamps = [m.timestamp() for m in msgs]
    return RecordChunk(
        keys=[m.key() for m in msgs],
        values=[m.value() for m in msgs],
        offsets=[m.offset() for m in msgs],
        timestamps=[t[1] for t in stamps],
        timestamp_types=[_TS_TYPE.get(t[0], -1) for t in stamps],
        headers=[m.headers() for m in msgs] if with_headers else None,
    )


class RangeConsumer:
    """A librdkafka consumer for :func:`read_range` (the caller may pool it), with the
    topics whose metadata it holds."""

    def __init__(self, conf: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        self.consumer: Any = Consumer(conf)
        self.known_topics: set[str] = set()

    def know(self, topic: str, timeout_s: float) -> None:
        """Fetch ``topic``'s metadata once, before its first assignment: librdkafka learns
        the leader of a topic assigned without it only on its next one-second metadata scan,
        so the first range of every new topic waited up to a second."""
        if topic in self.known_topics:
            return
        try:
            call("Metadata", self.consumer.list_topics, topic, timeout_s)
        except ClientError:
            return  # unreachable: the range's read waits and words its own timeout
        self.known_topics.add(topic)

    def unassign(self) -> None:
        """Before the consumer is reused for another range."""
        self.consumer.unassign()

    def close(self) -> None:
        self.consumer.close()


def read_range(
    ranges: RangeConsumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    chunk_records: int,
    poll_timeout_s: float,
    with_headers: bool = False,
    on_timeout: Callable[[int], str] | None = None,
) -> Iterator[RecordChunk]:
    """Yield the records of ``topic-partition`` in ``[start, end)``, at most
    ``chunk_records`` per chunk. The consumer needs ``enable.partition.eof=true``.

    Raises :class:`OffsetOutOfRange` when ``start`` is gone, ``TimeoutError`` after
    ``poll_timeout_s`` without any message (``on_timeout(position)`` words it), and a
    :class:`~oncelog.client.errors.ClientError` for a fatal or non-retriable error."""
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KTP

    ranges.know(topic, max(1.0, poll_timeout_s))
    consumer = ranges.consumer
    consumer.assign([KTP(topic, partition, start)])
    position = start
    last_progress = time.monotonic()
    pending: list[Any] = []
    done = False
    while not done:
        # consume() returns when it has that many messages or the timeout passed. Asking for
        # what the range still needs (records, or the partition-EOF event after a trailing
        # control marker) ends a range without waiting; the short timeout bounds the wait
        # when aborted records or markers make fewer messages come.
        want = max(1, min(chunk_records - len(pending), end - position))
        msgs = consumer.consume(num_messages=want, timeout=0.05)
        if not msgs:
            if time.monotonic() - last_progress > poll_timeout_s:
                raise TimeoutError(
                    on_timeout(position)
                    if on_timeout is not None
                    else f"no data from {topic}-{partition} at offset {position}"
                )
            continue
        last_progress = time.monotonic()
        for m in msgs:
            err = m.error()
            if err is None:
                offset = m.offset()
                if offset < position or m.partition() != partition or m.topic() != topic:
                    continue  # never twice, never before start; a stale event of a previous range
                if offset >= end:
                    done = True
                    break
                pending.append(m)
                position = offset + 1
                if position >= end:
                    done = True
                    break
                continue
            if m.partition() is not None and (m.topic(), m.partition()) != (topic, partition):
                continue  # a stale event of the consumer's previous range
            code = err.code()
            if code == KafkaError._PARTITION_EOF:
                if (m.offset() or 0) >= end:
                    done = True
                    break
                continue
            if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                raise OffsetOutOfRange(
                    f"offset {start} of {topic}-{partition} is out of range",
                    from_kafka_error(err, "Fetch").error_code,
                    retriable=False,
                )
            # librdkafka retries lost connections itself: keep reading within the timeout.
            if (
                err.fatal()
                or not err.retriable()
                and code not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
            ):
                raise from_kafka_error(err, f"Fetch of {topic}-{partition}")
        if len(pending) >= chunk_records:
            yield _chunk(pending, with_headers)
            pending = []
    if pending:
        yield _chunk(pending, with_headers)
