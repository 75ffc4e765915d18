"""Test helpers over the worker's Kafka adapters (``oncelog.connect.kafka_io``):
short constructors taking a bootstrap address, a ClientFactory without a worker
config, and readers that check what landed in a topic."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from oncelog.connect.kafka_io.internal_topics import TopicLogConsumer, TopicWriter
from oncelog.connect.kafka_io.task_clients import (
    ConsumerSinkSource,
    DeadLetterProducer,
    ProducerSender,
)
from oncelog.connect.storage.offset_records import decode as decode_offset
from oncelog.connect.storage.offsets import OffsetsView

ConfluentSender = ProducerSender
ConfluentSinkSource = ConsumerSinkSource


def ConfluentOffsetWriter(bootstrap: str, topic: str) -> TopicWriter:  # noqa: N802 - kept name
    return TopicWriter({"bootstrap.servers": bootstrap}, topic)


def ConfluentDeadLetters(bootstrap: str, topic: str) -> DeadLetterProducer:  # noqa: N802
    return DeadLetterProducer({"bootstrap.servers": bootstrap}, topic)


def ConfluentLogConsumer(bootstrap: str) -> TopicLogConsumer:  # noqa: N802
    return TopicLogConsumer({"bootstrap.servers": bootstrap})


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


class ConfluentClients:
    """A worker's ClientFactory over confluent-kafka."""

    def __init__(self, bootstrap: str, offsets_topic: str) -> None:
        self.bootstrap = bootstrap
        self.offsets_topic = offsets_topic

    def record_sender(self, connector: str, task: int, connector_config: Any) -> ProducerSender:
        return ConfluentSender(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": "true", "linger.ms": "5"}
        )

    def offset_writer(self, connector: str) -> TopicWriter:
        return ConfluentOffsetWriter(self.bootstrap, self.offsets_topic)

    def sink_source(self, connector: str, task: int, connector_config: Any) -> ConsumerSinkSource:
        return ConfluentSinkSource(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"connect-{connector}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )

    def dead_letter_sender(self, connector: str, topic: str) -> DeadLetterProducer:
        return ConfluentDeadLetters(self.bootstrap, topic)


def read_to_end(
    bootstrap: str,
    topic: str,
    isolation: str = "read_committed",
    extra: dict[str, Any] | None = None,
) -> list[Any]:
    """Every message of ``topic`` (partition by partition) up to the end offsets listed
    now with ``isolation`` (for read_committed: the last stable offsets)."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    level = (
        IsolationLevel.READ_COMMITTED
        if isolation == "read_committed"
        else IsolationLevel.READ_UNCOMMITTED
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    partitions = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    ends = {
        tp.partition: result.result(15).offset
        for tp, result in admin.list_offsets(wanted, isolation_level=level).items()
    }
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            **(extra or {}),
        }
    )
    out: list[Any] = []
    try:
        for partition in partitions:
            end = ends[partition]
            if end <= 0:
                continue
            tp = TopicPartition(topic, partition, 0)
            consumer.assign([tp])
            deadline = time.monotonic() + 30
            while consumer.position([TopicPartition(topic, partition)])[0].offset < end:
                assert time.monotonic() < deadline, f"{topic}-{partition}: end {end} not reached"
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None and msg.offset() < end:
                    out.append(msg)
        return out
    finally:
        consumer.close()


class StatusList(list):  # type: ignore[type-arg]
    """A Worker's status sink that keeps every status reported, in order, and the
    active topics (KIP-558) recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.topics: list[tuple[str, int, str]] = []

    def put(self, status: object) -> None:
        self.append(status)

    def put_safe(self, status: object) -> None:
        self.append(status)

    def record_active_topic(self, connector: str, task: int, topic: str, now_ms: int) -> None:
        if (connector, task, topic) not in self.topics:
            self.topics.append((connector, task, topic))
