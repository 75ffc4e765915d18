"""KIP-467: a batch refused for some of its records names each of them. On a
compacted topic, keyless records are INVALID_RECORD: the response lists their batch
indexes with Kafka's message (LogValidator.validateKey), nothing of the batch is
appended, and librdkafka fails those records with that message (its test 0011)."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import build_batch

from .helpers import create_topic
from .test_bad_input import produce_raw

MESSAGE = "Compacted topic cannot accept message without key in topic partition {}-0"


def test_keyless_records_on_a_compacted_topic_are_named_by_index(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1, config={"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = [(None if i % 10 == 3 else b"k%d" % i, b"v%d" % i, None, now) for i in range(100)]
    with WireClient(broker.bootstrap) as c:
        answer = produce_raw(c, topic_name, 0, bytearray(build_batch(records)))
        assert answer.error_code == ErrorCode.invalid_record
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
            (i, MESSAGE.format(topic_name)) for i in range(3, 100, 10)
        ]
        assert answer.error_message == (
            "One or more records have been rejected due to 10 record errors in total, and only "
            "showing the first three errors at most: ["
            + ", ".join(
                f"RecordError(batchIndex={i}, message='{MESSAGE.format(topic_name)}')"
                for i in (3, 13, 23)
            )
            + "]"
        )
        # Nothing of the batch was appended; a keyed batch goes in at offset 0.
        ok = produce_raw(c, topic_name, 0, bytearray(build_batch([(b"k", b"v", None, now)])))
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)

    # librdkafka fails exactly the named records as INVALID_RECORD, and the others of the
    # batch with its local "an invalid record in the same batch" code.
    outcome: dict[int, int | None] = {}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
    for i in range(100):
        key = None if i % 10 == 3 else b"k%d" % i

        def report(err: KafkaError | None, msg: object, i: int = i) -> None:
            outcome[i] = None if err is None else err.code()

        producer.produce(topic_name, key=key, value=b"v", partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    assert {i for i, code in outcome.items() if code == KafkaError.INVALID_RECORD} == set(
        range(3, 100, 10)
    )
    assert {i for i, code in outcome.items() if code == KafkaError._INVALID_DIFFERENT_RECORD} == {
        i for i in range(100) if i % 10 != 3
    }
