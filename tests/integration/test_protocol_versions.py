"""The newest versions a real client negotiates are served: librdkafka (confluent-kafka)
produces with Produce v10 and consumes with Fetch v16 (topic ids, KIP-516/KIP-951), and
keeps transaction version 1 even when the broker finalizes transaction.version 2."""

from __future__ import annotations

import logging
import re

import pytest
from confluent_kafka import Consumer, Producer

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic

SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.sent: set[tuple[str, int]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        match = SENT.search(record.getMessage())
        if match:
            self.sent.add((match.group(1), int(match.group(2))))


@pytest.fixture
def protocol_log() -> _Collect:
    handler = _Collect()
    logger = logging.getLogger("librdkafka-protocol")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return handler


def test_librdkafka_produces_v10_and_fetches_v16_by_topic_id(
    broker: EmbeddedBroker, topic_name: str, protocol_log: _Collect
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    debug = {"debug": "protocol", "logger": logging.getLogger("librdkafka-protocol")}
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **debug}
    )
    for i in range(20):
        producer.produce(topic_name, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{topic_name}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            **debug,
        }
    )
    try:
        consumer.subscribe([topic_name])
        values = []
        while len(values) < 20:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(values)} records"
            assert msg.error() is None, msg.error()
            values.append(int(msg.value()))
        assert sorted(values) == list(range(20))
    finally:
        consumer.close()
    produce_versions = {v for api, v in protocol_log.sent if api == "Produce"}
    fetch_versions = {v for api, v in protocol_log.sent if api == "Fetch"}
    assert produce_versions == {10}
    assert fetch_versions == {16}


def test_librdkafka_stays_on_transaction_version_1_when_2_is_finalized(
    broker: EmbeddedBroker, topic_name: str, protocol_log: _Collect
) -> None:
    """librdkafka 2.16 does not read the transaction.version feature: with TV2 finalized it
    still adds partitions explicitly and ends transactions with EndTxn v1 (no epoch bump),
    which the broker serves unchanged."""
    create_topic(broker.bootstrap, topic_name, 1)
    debug = {"debug": "protocol", "logger": logging.getLogger("librdkafka-protocol")}
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{topic_name}", **debug}
    )
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        producer.produce(topic_name, value=b"x")
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    sent = protocol_log.sent
    assert {v for api, v in sent if api == "EndTxn"} == {1}
    assert {v for api, v in sent if api == "Produce"} == {10}
    assert any(api == "AddPartitionsToTxn" for api, _ in sent)
    with TxnAdmin(ClientConfig(broker.bootstrap)) as admin:
        d = admin.describe_txn(f"t-{topic_name}")
    # TV1: commit and abort keep the epoch InitProducerId handed out.
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", 0)
