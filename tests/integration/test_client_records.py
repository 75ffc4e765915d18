"""The client layer's KafkaProducer and KafkaConsumer against a real broker: what a record
and a delivery report carry, partition ends and errors apart from records, transactions,
a fenced producer and a refused configuration as ClientErrors by code."""

from __future__ import annotations

import logging

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.consumer import BEGINNING, KafkaConsumer, PartitionEnd
from oncelog.client.errors import LOCAL_FENCED, ClientError
from oncelog.client.kafka_producer import Delivered, KafkaProducer
from oncelog.embedded import EmbeddedBroker


def consumer(cfg: ClientConfig, **settings: object) -> KafkaConsumer:
    return KafkaConsumer.of(
        cfg, **{"group.id": "records-test", "enable.auto.commit": False, **settings}
    )


def test_records_and_delivery_reports(broker: EmbeddedBroker, topic_name: str) -> None:
    cfg = ClientConfig(broker.bootstrap)
    with Admin(cfg) as admin:
        assert admin.create_topics([topic_name], 2) == [topic_name]
        assert admin.create_topics([topic_name], 2) == []  # it exists
    producer = KafkaProducer.of(cfg, **{"enable.idempotence": True})
    reports: list[tuple[ClientError | None, Delivered | None]] = []
    for i in range(3):
        producer.produce(
            topic_name,
            b"v%d" % i,
            b"k",
            partition=1,
            timestamp=1_700_000_000_000 + i,
            headers=[("h", b"x"), ("none", None)],
            on_delivery=lambda err, sent: reports.append((err, sent)),
        )
    assert producer.flush(30) == 0
    assert reports == [(None, Delivered(topic_name, 1, i, 1_700_000_000_000 + i)) for i in range(3)]

    c = consumer(cfg, **{"enable.partition.eof": True})
    try:
        assert c.partitions(topic_name, 10) == [0, 1]
        assert c.partitions("no-such-topic-here", 10) is None
        c.assign([(topic_name, 0, BEGINNING), (topic_name, 1, BEGINNING)])
        records, ends = [], set()
        for _ in range(50):
            polled = c.consume(100, 0.2)
            assert polled.errors == []
            records += polled.records
            ends |= set(polled.ends)
            if {PartitionEnd(topic_name, 0, 0), PartitionEnd(topic_name, 1, 3)} <= ends:
                break
        assert [(r.partition, r.offset, r.key, r.value) for r in records] == [
            (1, i, b"k", b"v%d" % i) for i in range(3)
        ]
        assert {(r.timestamp, r.timestamp_type) for r in records} == {
            (1_700_000_000_000 + i, "CreateTime") for i in range(3)
        }
        assert records[0].headers == (("h", b"x"), ("none", None))
        assert {PartitionEnd(topic_name, 0, 0), PartitionEnd(topic_name, 1, 3)} <= ends
        assert c.positions([(topic_name, 1)]) == {(topic_name, 1): 3}
        assert c.end_offsets([(topic_name, 0), (topic_name, 1)], 10) == {
            (topic_name, 0): 0,
            (topic_name, 1): 3,
        }
    finally:
        c.close()


def test_transactions_and_fencing(broker: EmbeddedBroker, topic_name: str) -> None:
    cfg = ClientConfig(broker.bootstrap)
    with Admin(cfg) as admin:
        admin.create_topics([topic_name], 1)
    settings = {"transactional.id": f"{topic_name}-tid", "enable.sparse.connections": False}
    old = KafkaProducer.of(cfg, **settings)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic_name, b"aborted")
    old.abort_transaction(30)
    old.begin_transaction()
    old.produce(topic_name, b"committed")
    old.commit_transaction(30)

    new = KafkaProducer.of(cfg, **settings)
    new.init_transactions(30)  # fences the old one
    old.begin_transaction()
    old.produce(topic_name, b"zombie")
    with pytest.raises(ClientError) as info:
        old.commit_transaction(30)
    assert info.value.local_code == LOCAL_FENCED
    assert info.value.fatal and not info.value.retriable
    assert info.value.what == "EndTxn(commit)"

    c = consumer(cfg, **{"isolation.level": "read_committed"})
    try:
        c.assign([(topic_name, 0, BEGINNING)])
        values: list[bytes | None] = []
        for _ in range(50):  # until the commit marker is written (asynchronously)
            values += [r.value for r in c.consume(100, 0.2).records]
            if values:
                break
        assert values == [b"committed"]
        # Nothing more: the aborted record is skipped, the zombie's never written.
        assert c.consume(100, 1.0).records == []
    finally:
        c.close()


@pytest.mark.parametrize("wait", ["flush", "poll"])
def test_a_producer_fenced_during_a_long_wait_raises_the_fatal_error(
    broker: EmbeddedBroker, topic_name: str, wait: str
) -> None:
    """confluent-kafka loses a fatal error raised during a wait of 200 ms or more when its
    logger runs after it (as the Connect worker's does): the call failed with a SystemError
    ("returned NULL without setting an exception") instead of the fenced producer's error."""
    cfg = ClientConfig(broker.bootstrap)
    with Admin(cfg) as admin:
        admin.create_topics([topic_name], 1)
    settings = {"transactional.id": f"{topic_name}-tid", "logger": logging.getLogger("rdkafka")}
    old = KafkaProducer.of(cfg, **settings)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic_name, b"first")
    assert old.flush(30) == 0
    KafkaProducer.of(cfg, **settings).init_transactions(30)  # fences the old one
    for _ in range(5):
        old.produce(topic_name, b"zombie", on_delivery=lambda err, sent: None)
    with pytest.raises(ClientError) as info:
        # (librdkafka may serve the failed records' reports in one call and raise the fatal
        # error in the next: a few calls, any of which may raise; a SystemError fails the test)
        for _ in range(3):
            old.flush(30) if wait == "flush" else old.poll(5)
    assert info.value.local_code == LOCAL_FENCED
    assert info.value.fatal


def test_a_refused_configuration_and_a_full_buffer_are_client_errors() -> None:
    with pytest.raises(ClientError) as info:
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "sasl.mechansim": "PLAIN"})
    assert info.value.detail == 'No such configuration property: "sasl.mechansim"'
    assert info.value.error_code is None and info.value.local_code is not None

    producer = KafkaProducer(
        {"bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.messages": 1}
    )
    producer.produce("t", b"one")
    with pytest.raises(ClientError) as full:
        producer.produce("t", b"two", wait_for_space=False)
    assert full.value.retriable and full.value.name == "_QUEUE_FULL"


def test_offset_commit_and_group_errors_by_code(broker: EmbeddedBroker, topic_name: str) -> None:
    from oncelog.client.groups import GroupAdmin

    cfg = ClientConfig(broker.bootstrap)
    with Admin(cfg) as admin:
        admin.create_topics([topic_name], 1)
        group = f"{topic_name}-group"
        c = consumer(cfg, **{"group.id": group})
        try:
            c.commit({(topic_name, 0): 0})
        finally:
            c.close()
        groups = GroupAdmin(admin)
        assert groups.committed(group) == {(topic_name, 0): 0}
        groups.delete_groups([group])
        with pytest.raises(ClientError) as info:
            groups.delete_groups([group])
        assert info.value.error_code == ErrorCode.group_id_not_found
