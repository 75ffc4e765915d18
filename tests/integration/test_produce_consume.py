"""Round trips through real clients: confluent-kafka (librdkafka) and kafka-python."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from oncelog.embedded import EmbeddedBroker

from .helpers import consume, create_topic, produce


def test_idempotent_100k_six_partitions_exactly_once_in_order(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    n, parts = 100_000, 6
    create_topic(broker.bootstrap, topic_name, parts)
    items = [(f"k{i}".encode(), f"v{i}".encode(), i % parts) for i in range(n)]
    acked = produce(broker.bootstrap, topic_name, items, acks="all")
    assert len(acked) == n
    msgs = consume(broker.bootstrap, topic_name, parts, n)
    assert len(msgs) == n
    values = [m.value() for m in msgs]
    assert len(set(values)) == n
    for p in range(parts):
        got = [int(m.value()[1:]) for m in msgs if m.partition() == p]
        assert got == sorted(got) == list(range(p, n, parts))
        offsets = [m.offset() for m in msgs if m.partition() == p]
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs_keys_values_headers_timestamps_intact(
    broker: EmbeddedBroker, topic_name: str, codec: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 20,
        }
    )
    sent = []
    for i in range(2000):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 11 == 0 else (f"value-{i}-" * (i % 50)).encode()
        headers = [("h-ü", f"{i}".encode()), ("empty", b""), ("null", None)] if i % 3 == 0 else None
        ts = 1_700_000_000_000 + i
        producer.produce(
            topic_name, key=key, value=value, partition=i % 2, headers=headers, timestamp=ts
        )
        sent.append((key, value, headers, ts, i % 2))
    assert producer.flush(30) == 0
    msgs = consume(broker.bootstrap, topic_name, 2, len(sent))
    assert len(msgs) == len(sent)
    by_part = {p: [m for m in msgs if m.partition() == p] for p in (0, 1)}
    expected = {p: [s for s in sent if s[4] == p] for p in (0, 1)}
    for p in (0, 1):
        for m, (key, value, headers, ts, _) in zip(by_part[p], expected[p], strict=True):
            assert m.key() == key
            assert m.value() == value
            assert m.timestamp() == (1, ts)  # (TIMESTAMP_CREATE_TIME, ts)
            got_headers = m.headers()
            if headers is None:
                assert not got_headers
            else:
                assert got_headers == [("h-ü", headers[0][1]), ("empty", b""), ("null", None)]


def test_kafka_python_round_trip(broker: EmbeddedBroker, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 3, 1)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=True,
        acks="all",
        compression_type="gzip",
    )
    futures = [
        producer.send(
            topic_name,
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 3,
            headers=[("n", b"%d" % i)],
        )
        for i in range(3000)
    ]
    producer.flush()
    metas = [f.get(timeout=10) for f in futures]
    assert sorted((m.partition, m.offset) for m in metas) == sorted(
        (p, o) for p in range(3) for o in range(1000)
    )
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    consumer.assign([TopicPartition(topic_name, p) for p in range(3)])
    consumer.seek_to_beginning()
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 3000:
            break
    consumer.close()
    assert sorted(int(m.value[1:]) for m in got) == list(range(3000))
    for m in got:
        assert m.key == b"k" + m.value[1:]
        assert m.headers == [("n", m.value[1:])]
        assert int(m.value[1:]) % 3 == m.partition
