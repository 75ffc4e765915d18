"""The config topic on a real broker: records written in Kafka Connect's format are
read back to the end into the cluster config state, including a half-written task
config set (a leader that died before its commit)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    TargetStateRecord,
    TaskConfigRecord,
    connector_removal_records,
    decode,
    encode,
    task_config_records,
)
from oncelog.connect.storage.config_state import ConfigState
from oncelog.connect.storage.internal_log import InternalTopicReader, LogRecord
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import ConfluentLogConsumer

TOPIC = "connect-configs"


def test_config_topic_round_trip(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})])[
        TOPIC
    ].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})

    def write(*records: object) -> None:
        for record in records:
            key, value = encode(record)  # type: ignore[arg-type]
            producer.produce(TOPIC, key=key.encode(), value=value)
        assert producer.flush(10) == 0

    state = ConfigState()

    def apply(record: LogRecord) -> None:
        assert record.key is not None
        state.apply(record.offset, decode(record.key, record.value))

    consumer = ConfluentLogConsumer(broker.bootstrap)
    reader = InternalTopicReader(consumer, TOPIC, apply)
    try:
        reader.start()
        reader.read_to_end(10)
        assert state.snapshot().connectors() == []

        write(
            ConnectorConfigRecord("src", {"connector.class": "VerifiableSource", "tasks.max": "2"})
        )
        write(*task_config_records("src", [{"id": "0"}, {"id": "1"}]))
        write(
            ConnectorConfigRecord("gone", {"connector.class": "FileStreamSink"}),
            *connector_removal_records("gone"),
        )
        write(TargetStateRecord("src", TargetState.PAUSED))
        # A leader that died half-way: one task config of a new set of three, no commit.
        write(TaskConfigRecord("src", 0, {"id": "0", "v": "2"}))
        reader.read_to_end(10)
        snap = state.snapshot()
        assert snap.offset == 9 and reader.positions == {0: 9}
        assert snap.connectors() == ["src"]
        assert snap.tasks("src") == [ConnectorTaskId("src", 0), ConnectorTaskId("src", 1)]
        assert snap.task_configs[ConnectorTaskId("src", 0)] == {
            "id": "0"
        }  # the staged update is not live
        assert snap.target_state("src") is TargetState.PAUSED
    finally:
        consumer.close()
