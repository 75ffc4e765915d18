"""The sink task loop against a real broker: FileStreamSource -> topic ->
FileStreamSink round trip with committed group offsets, redelivery after a retriable
put() failure, and the dead-letter queue with errors.tolerance=all."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.connect.api import RetriableException, SinkRecord, SinkTask
from oncelog.connect.api.converters import JsonConverter, StringConverter
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.connectors.file_stream import FileStreamSinkTask, FileStreamSourceTask
from oncelog.connect.runtime.error_handling import ErrorPolicy
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.runtime.worker_sink_task import WorkerSinkTask
from oncelog.connect.runtime.worker_source_task import WorkerSourceTask
from oncelog.connect.storage.offsets import MemoryOffsetStore
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import (
    ConfluentDeadLetters,
    ConfluentOffsetWriter,
    ConfluentSender,
    ConfluentSinkSource,
    consume_all,
)


def _topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(n, 1, 1) for n in names] + [
        NewTopic("connect-offsets", 1, 1, config={"cleanup.policy": "compact"})
    ]
    for future in admin.create_topics(new).values():
        future.result(15)


def _json(schemas: bool) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, False)
    return converter


def _sink_loop(
    broker: EmbeddedBroker, name: str, task: SinkTask, config: dict[str, str], **kw: Any
) -> WorkerSinkTask:
    source = ConfluentSinkSource(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"connect-{name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    key_converter = StringConverter()
    key_converter.configure({}, True)
    loop = WorkerSinkTask(
        ConnectorTaskId(name, 0),
        task,
        config,
        key_converter=key_converter,
        value_converter=kw.pop("value_converter", _json(True)),
        chain=TransformationChain([]),
        source=source,
        offset_flush_interval_ms=kw.pop("flush_ms", 60_000),
        **kw,
    )
    loop.start()
    return loop


def _committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return int(consumer.committed([KafkaTopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


def test_file_round_trip(broker: EmbeddedBroker, tmp_path: Path) -> None:
    _topics(broker.bootstrap, "round-trip")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i} {uuid.uuid4().hex}" for i in range(300)]
    source_file.write_text("".join(line + "\n" for line in lines))

    key_converter = StringConverter()
    key_converter.configure({}, True)
    source = WorkerSourceTask(
        ConnectorTaskId("file-source", 0),
        FileStreamSourceTask(),
        {"file": str(source_file), "topic": "round-trip"},
        key_converter=key_converter,
        value_converter=_json(True),
        chain=TransformationChain([]),
        sender=ConfluentSender(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": "true"}
        ),
        offset_writer=ConfluentOffsetWriter(broker.bootstrap, "connect-offsets"),
        offsets=MemoryOffsetStore(),
    )
    source.start()
    while source.metrics.sent < 300:
        source.iterate()
    assert source.close() is True
    source.stop()

    sink = _sink_loop(
        broker, "file-sink", FileStreamSinkTask(), {"file": str(sink_file), "topics": "round-trip"}
    )
    for _ in range(120):
        sink.iterate(0.5)
        if sink.metrics.put >= 300:
            break
    sink.close()
    sink.stop()
    assert sink.metrics.put == 300 and sink.metrics.commits == 1
    assert sink_file.read_text().splitlines() == lines
    assert _committed(broker.bootstrap, "connect-file-sink", "round-trip") == 300
    del source, sink


class FlakySinkTask(SinkTask):
    """Fails its first non-empty put() with a retriable error."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self.failed = False
        self.opened: list[Any] = []

    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        pass

    def open(self, partitions: Any) -> None:
        self.opened.extend(partitions)

    def put(self, records: list[SinkRecord]) -> None:
        if records and not self.failed:
            self.failed = True
            self.context.timeout(200)
            raise RetriableException("database busy")
        self.received.extend(r.value for r in records)

    def stop(self) -> None:
        pass


def test_retriable_put_redelivers_the_batch(broker: EmbeddedBroker) -> None:
    _topics(broker.bootstrap, "flaky")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce("flaky", value=json.dumps({"n": i}).encode())
    producer.flush(10)
    task = FlakySinkTask()
    loop = _sink_loop(broker, "flaky-sink", task, {"topics": "flaky"}, value_converter=_json(False))
    for _ in range(100):
        loop.iterate(0.3)
        if len(task.received) >= 50:
            break
    loop.context.request_commit()
    loop.iterate(0.1)
    assert task.received == [{"n": i} for i in range(50)]
    assert loop.metrics.retries == 1
    assert [(tp.topic, tp.partition) for tp in task.opened] == [("flaky", 0)]
    assert _committed(broker.bootstrap, "connect-flaky-sink", "flaky") == 50
    loop.close()
    del loop


def test_dead_letter_queue_receives_unconvertible_records(broker: EmbeddedBroker) -> None:
    _topics(broker.bootstrap, "mixed", "mixed-dlq")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in (b'{"ok": 1}', b"not json", b'{"ok": 2}'):
        producer.produce("mixed", value=value)
    producer.flush(10)
    task = FlakySinkTask()
    task.failed = True  # no retriable failure in this test
    loop = _sink_loop(
        broker,
        "dlq-sink",
        task,
        {"topics": "mixed"},
        value_converter=_json(False),
        errors=ErrorPolicy(tolerate_all=True, log_errors=True),
        dead_letters=ConfluentDeadLetters(broker.bootstrap, "mixed-dlq"),
    )
    for _ in range(60):
        loop.iterate(0.3)
        if loop.metrics.consumed >= 3:
            break
    assert task.received == [{"ok": 1}, {"ok": 2}]
    assert (loop.metrics.skipped_errors, loop.metrics.dead_lettered) == (1, 1)
    assert [m.value() for m in consume_all(broker.bootstrap, "mixed-dlq", 1)] == [b"not json"]
    loop.close()
    del loop
