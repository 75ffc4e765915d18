"""confluent-kafka adapters for the task loops' interfaces, for tests until the
worker wires the client layer's producer and consumer in."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from oncelog.connect.errors import ConnectException
from oncelog.connect.internal_log import LogRecord
from oncelog.connect.offset_records import decode as decode_offset
from oncelog.connect.offsets import OffsetsView
from oncelog.connect.records import RecordMetadata
from oncelog.connect.records import TopicPartition as ConnectTopicPartition
from oncelog.connect.worker_sink_task import ConsumedRecord
from oncelog.connect.worker_source_task import DeliveryCallback


class ConfluentSender:
    def __init__(self, config: dict[str, str]) -> None:
        self.producer = Producer(config)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None,
        timestamp: int | None,
        headers: Sequence[tuple[str, bytes | None]],
        on_delivery: DeliveryCallback,
    ) -> None:
        def callback(err: Any, msg: Any) -> None:
            if err is not None:
                on_delivery(KafkaException(err), None)
            else:
                on_delivery(
                    None,
                    RecordMetadata(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1]),
                )

        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                self.producer.produce(
                    topic,
                    value=value,
                    key=key,
                    headers=list(headers) or None,
                    on_delivery=callback,
                    **kwargs,
                )
                return
            except BufferError:
                self.producer.poll(0.1)

    def poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)

    def flush(self, timeout_s: float) -> int:
        return int(self.producer.flush(timeout_s))


class ConfluentOffsetWriter:
    def __init__(self, bootstrap: str, topic: str) -> None:
        # murmur2 places each key on the partition Java's producer would choose.
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
            }
        )
        self.topic = topic

    def write(self, records: Sequence[tuple[bytes, bytes | None]], timeout_s: float) -> None:
        errors: list[Any] = []
        for key, value in records:
            self.producer.produce(
                self.topic,
                key=key,
                value=value,
                on_delivery=lambda e, m: errors.append(e) if e else None,
            )
        remaining = self.producer.flush(timeout_s)
        if remaining or errors:
            raise ConnectException(f"offset write failed: {remaining} outstanding, errors {errors}")


def read_offsets_topic(
    bootstrap: str, topic: str, partitions: int
) -> tuple[OffsetsView, list[tuple[bytes, bytes | None]]]:
    """Read an offsets topic to its end, as a worker does at start."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "offsets-reader", "enable.auto.commit": False}
    )
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign(tps)
        view = OffsetsView()
        raw: list[tuple[bytes, bytes | None]] = []
        remaining = {p for p, end in ends.items() if end > 0}
        positions = dict.fromkeys(ends, 0)
        while remaining:
            msg = consumer.poll(5)
            assert msg is not None, f"offsets topic read stalled at {positions} of {ends}"
            assert msg.error() is None, msg.error()
            raw.append((msg.key(), msg.value()))
            view.apply(decode_offset(msg.key(), msg.value()))
            positions[msg.partition()] = msg.offset() + 1
            if positions[msg.partition()] >= ends[msg.partition()]:
                remaining.discard(msg.partition())
        return view, raw
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 20) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg)
        # Anything beyond the expected count would show up here.
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
        return out
    finally:
        consumer.close()


class ConfluentSinkSource:
    """The sink task's consumer over confluent-kafka."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.consumer = Consumer(config)

    def subscribe(
        self,
        topics: list[str],
        pattern: str | None,
        on_assign: Callable[[list[ConnectTopicPartition]], None],
        on_revoke: Callable[[list[ConnectTopicPartition]], None],
    ) -> None:
        def convert(parts: list[Any]) -> list[ConnectTopicPartition]:
            return [ConnectTopicPartition(p.topic, p.partition) for p in parts]

        self.consumer.subscribe(
            topics or [f"^{pattern}"],
            on_assign=lambda c, parts: on_assign(convert(parts)),
            on_revoke=lambda c, parts: on_revoke(convert(parts)),
        )

    def poll(self, timeout_s: float, max_records: int) -> list[ConsumedRecord]:
        out = []
        for msg in self.consumer.consume(max_records, timeout_s):
            if msg.error() is not None:
                continue
            out.append(
                ConsumedRecord(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.timestamp()[1],
                    headers=tuple(msg.headers() or ()),
                )
            )
        return out

    def commit(self, offsets: dict[ConnectTopicPartition, int]) -> None:
        self.consumer.commit(
            offsets=[TopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )

    def seek(self, partition: ConnectTopicPartition, offset: int) -> None:
        self.consumer.seek(TopicPartition(partition.topic, partition.partition, offset))

    def pause(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.pause([TopicPartition(p.topic, p.partition) for p in partitions])

    def resume(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.resume([TopicPartition(p.topic, p.partition) for p in partitions])

    def close(self) -> None:
        self.consumer.close()


class ConfluentDeadLetters:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.topic = topic

    def send(self, record: ConsumedRecord, error: Exception) -> None:
        self.producer.produce(self.topic, key=record.key, value=record.value)
        self.producer.flush(10)


class ConfluentLogConsumer:
    """LogConsumer over confluent-kafka (no group: positions are tracked by the reader)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"log-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )

    def partitions(self, topic: str) -> list[int]:
        metadata = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        return sorted(metadata.partitions)

    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return {
            p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }

    def assign(self, topic: str, positions: dict[int, int]) -> None:
        self.consumer.assign([TopicPartition(topic, p, o) for p, o in positions.items()])

    def poll(self, timeout_s: float) -> list[LogRecord]:
        return [
            LogRecord(m.partition(), m.offset(), m.key(), m.value())
            for m in self.consumer.consume(500, timeout_s)
            if m.error() is None
        ]

    def positions(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return {
            tp.partition: tp.offset
            for tp in self.consumer.position([TopicPartition(topic, p) for p in partitions])
        }

    def close(self) -> None:
        self.consumer.close()


class ConfluentClients:
    """A worker's ClientFactory over confluent-kafka."""

    def __init__(self, bootstrap: str, offsets_topic: str) -> None:
        self.bootstrap = bootstrap
        self.offsets_topic = offsets_topic

    def record_sender(self, connector: str, task: int, connector_config: Any) -> ConfluentSender:
        return ConfluentSender(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": "true", "linger.ms": "5"}
        )

    def offset_writer(self, connector: str) -> ConfluentOffsetWriter:
        return ConfluentOffsetWriter(self.bootstrap, self.offsets_topic)

    def sink_source(self, connector: str, task: int, connector_config: Any) -> ConfluentSinkSource:
        return ConfluentSinkSource(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"connect-{connector}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    def dead_letter_sender(self, connector: str, topic: str) -> ConfluentDeadLetters:
        return ConfluentDeadLetters(self.bootstrap, topic)
