"""KIP-360 with real clients: an idempotent producer whose broker-side state was dropped
(idle past producer.id.expiration.ms, or its records removed by DeleteRecords) keeps
producing without an error and without duplicates, as with Kafka >= 2.5."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer

from oncelog.embedded import EmbeddedBroker

from .helpers import consume, create_topic

EXPIRY_MS = 1_000


@pytest.fixture
def expiring_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(
        tmp_path / "data",
        settings={
            "producer.id.expiration.ms": str(EXPIRY_MS),
            "producer.id.expiration.check.interval.ms": "100",
            "log.flush.scheduler.interval.ms": "50",
        },
    ).start()
    try:
        yield b
    finally:
        b.stop()


def _send_all(producer: Producer, topic: str, values: range, errors: list[KafkaError]) -> None:
    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(err)

    for i in values:
        producer.produce(topic, value=b"%d" % i, partition=0, on_delivery=cb)
    assert producer.flush(30) == 0


def _values(bootstrap: str, topic: str, expected: int, start: int = 0) -> list[int]:
    msgs = consume(bootstrap, topic, 1, expected, timeout=30)
    return [int(m.value()) for m in msgs if m.offset() >= start]


def test_confluent_producer_continues_after_its_state_expired(
    expiring_broker: EmbeddedBroker, topic_name: str
) -> None:
    bootstrap = expiring_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[KafkaError] = []
    _send_all(producer, topic_name, range(0, 50), errors)
    time.sleep(EXPIRY_MS / 1000 * 2.5)  # the broker forgets the idle producer
    _send_all(producer, topic_name, range(50, 100), errors)
    assert errors == []
    assert _values(bootstrap, topic_name, 100) == list(range(100))


def test_confluent_producer_continues_after_delete_records(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": "4096"})
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[KafkaError] = []
    _send_all(producer, topic_name, range(0, 200), errors)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(topic_name, 0, 200)])
    low = futures[TopicPartition(topic_name, 0, 200)].result(15)
    assert low.low_watermark == 200  # every record (and so the producer's state) is gone
    _send_all(producer, topic_name, range(200, 300), errors)
    assert errors == []
    assert _values(broker.bootstrap, topic_name, 100, start=200) == list(range(200, 300))


def test_kafka_python_producer_continues_after_its_state_expired(
    expiring_broker: EmbeddedBroker, topic_name: str
) -> None:
    bootstrap = expiring_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    try:
        for i in range(30):
            producer.send(topic_name, value=b"%d" % i, partition=0).get(15)
        time.sleep(EXPIRY_MS / 1000 * 2.5)
        for i in range(30, 60):
            producer.send(topic_name, value=b"%d" % i, partition=0).get(15)
    finally:
        producer.close(5)
    assert _values(bootstrap, topic_name, 60) == list(range(60))
