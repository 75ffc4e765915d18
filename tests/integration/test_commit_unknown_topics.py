"""Offsets for a topic or partition that does not exist are refused per partition with
UNKNOWN_TOPIC_OR_PARTITION and never stored, as Kafka's KafkaApis answers OffsetCommit,
TxnOffsetCommit and OffsetDelete (librdkafka's test 0030 ``do_nonexist_commit``)."""

from __future__ import annotations

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )


def test_commits_for_unknown_topics_and_partitions_are_refused(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    consumer = _consumer(broker.bootstrap, "nonexist-commit")
    try:
        # The whole commit refused: every partition answers UNKNOWN_TOPIC_OR_PARTITION.
        try:
            result = consumer.commit(
                offsets=[TopicPartition("no-such-topic", 0, 5)], asynchronous=False
            )
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc
        else:
            assert [tp.error.code() for tp in result] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
        # A mix: the existing partition is stored, the others are refused one by one.
        try:
            mixed = consumer.commit(
                offsets=[
                    TopicPartition(topic_name, 0, 7),
                    TopicPartition(topic_name, 9, 7),
                    TopicPartition("no-such-topic", 1, 7),
                ],
                asynchronous=False,
            )
            errors = {(tp.topic, tp.partition): tp.error for tp in mixed}
        except KafkaException as exc:
            # librdkafka raises the first partition error and keeps the per-partition ones.
            errors = {}
            assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc
        if errors:
            assert errors[(topic_name, 0)] is None
            assert errors[(topic_name, 9)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            assert errors[("no-such-topic", 1)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        committed = consumer.committed(
            [
                TopicPartition("no-such-topic", 0),
                TopicPartition(topic_name, 0),
                TopicPartition(topic_name, 9),
            ],
            timeout=15,
        )
        assert [tp.offset for tp in committed][1] == 7
        assert committed[0].offset < 0 and committed[2].offset < 0
    finally:
        consumer.close()
    # No topic was created on the way.
    assert (
        "no-such-topic"
        not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    )


def test_admin_alter_and_delete_offsets_of_unknown_topics(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    request = ConsumerGroupTopicPartitions(
        "nonexist-alter", [TopicPartition("no-such-topic", 0, 3), TopicPartition(topic_name, 0, 3)]
    )
    [future] = admin.alter_consumer_group_offsets([request]).values()
    try:
        result = future.result(15)
        by_tp = {(tp.topic, tp.partition): tp.error for tp in result.topic_partitions}
        assert by_tp[(topic_name, 0)] is None
        assert by_tp[("no-such-topic", 0)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc
    [listed] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("nonexist-alter")]
    ).values()
    stored = {(tp.topic, tp.partition): tp.offset for tp in listed.result(15).topic_partitions}
    assert stored == {(topic_name, 0): 3}


def test_transactional_offsets_for_unknown_topics_are_refused(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "nonexist-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"x")
    consumer = _consumer(broker.bootstrap, "nonexist-txn-group")
    try:
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition("no-such-topic", 0, 4)], consumer.consumer_group_metadata(), 30
            )
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, exc
        else:
            raise AssertionError("TxnOffsetCommit for an unknown topic was accepted")
        producer.abort_transaction(30)
        committed = consumer.committed([TopicPartition("no-such-topic", 0)], timeout=15)
        assert committed[0].offset < 0
    finally:
        consumer.close()
