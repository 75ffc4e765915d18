"""The client layer's range reader with one consumer reused across ranges and topics, as
the Spark source's pooled consumers are: exact ranges, and each topic's metadata fetched
before its first assignment (else librdkafka waits for its next one-second metadata scan)."""

from __future__ import annotations

from confluent_kafka import Producer

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.range_reader import RangeConsumer, read_range
from oncelog.embedded import EmbeddedBroker


def test_one_consumer_reads_ranges_of_several_topics(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    with Admin(ClientConfig(broker.bootstrap)) as admin:
        admin.create_topics(topics, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for t in topics:
        for i in range(100):
            p.produce(t, b"%s-%d" % (t.encode(), i), partition=i % 2)
    assert p.flush(30) == 0
    consumer = RangeConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ranges",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        got = {}
        for t, part, start, end in [
            (topics[0], 0, 0, 50),
            (topics[1], 1, 10, 20),
            (topics[0], 1, 45, 50),
        ]:
            chunks = read_range(consumer, t, part, start, end, chunk_records=7, poll_timeout_s=20)
            got[(t, part)] = [o for c in chunks for o in c.offsets]
            consumer.unassign()
        assert got == {
            (topics[0], 0): list(range(50)),
            (topics[1], 1): list(range(10, 20)),
            (topics[0], 1): list(range(45, 50)),
        }
        assert consumer.known_topics == set(topics)
    finally:
        consumer.close()
