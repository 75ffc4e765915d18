"""Client-side helpers shared by integration tests (real clients only)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


@dataclass
class Delivered:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int


def produce(
    bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None, int]], **conf: object
) -> list[Delivered]:
    """Produce (key, value, partition) items idempotently; return acks in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **conf}
    )
    acked: list[Delivered] = []
    errors: list[KafkaError] = []

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)
        else:
            acked.append(Delivered(msg.key(), msg.value(), msg.partition(), msg.offset()))

    for key, value, partition in items:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    *,
    timeout: float = 60.0,
    **conf: object,
) -> list:  # type: ignore[type-arg]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 0.5):
                if msg.error():
                    raise AssertionError(msg.error())
                out.append(msg)
        # a short grace period to catch extra (duplicate) records
        for msg in consumer.consume(10000, 0.5):
            assert not msg.error(), msg.error()
            out.append(msg)
    finally:
        consumer.close()
    return out


def wait_for_log(broker: EmbeddedBroker, needle: str, timeout: float = 15.0) -> str:
    """The broker's log once it holds ``needle``: __consumer_offsets and
    __transaction_state load in the background after the ready line (as Kafka loads a coordinator partition while serving)."""
    deadline = time.monotonic() + timeout
    while needle not in (text := broker.log_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return text
