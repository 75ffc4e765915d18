"""The source task loop against a real broker: FileStreamSource through a transform and
the JSON converter into a topic, offsets committed to a compacted offsets topic in
Kafka Connect's format, and a restarted task resuming from them."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.connect.api.converters import JsonConverter, StringConverter
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.connectors.file_stream import FileStreamSourceTask
from oncelog.connect.runtime.error_handling import ErrorPolicy
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.transformation_chain import build_chain
from oncelog.connect.runtime.worker_source_task import WorkerSourceTask
from oncelog.connect.storage.offsets import MemoryOffsetStore
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import ConfluentOffsetWriter, ConfluentSender, consume_all, read_offsets_topic

OFFSETS_TOPIC = "connect-offsets"
OFFSET_PARTITIONS = 5


def _create_topics(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(OFFSETS_TOPIC, OFFSET_PARTITIONS, 1, config={"cleanup.policy": "compact"})]
    new += [NewTopic(t, 1, 1) for t in topics]
    for future in admin.create_topics(new).values():
        future.result(15)


def _loop(broker: EmbeddedBroker, path: Path, offsets: MemoryOffsetStore) -> WorkerSourceTask:
    config = {
        "file": str(path),
        "topic": "lines",
        "batch.size": "7",
        "transforms": "route",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "lines",
        "transforms.route.replacement": "file-lines",
    }
    key_converter, value_converter = StringConverter(), JsonConverter()
    key_converter.configure({}, True)
    value_converter.configure({"schemas.enable": "true"}, False)
    loop = WorkerSourceTask(
        ConnectorTaskId("file-src", 0),
        FileStreamSourceTask(),
        config,
        key_converter=key_converter,
        value_converter=value_converter,
        chain=build_chain(config, PluginRegistry.with_builtins()),
        sender=ConfluentSender(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": "true",
                "acks": "all",
                "linger.ms": "5",
            }
        ),
        offset_writer=ConfluentOffsetWriter(broker.bootstrap, OFFSETS_TOPIC),
        offsets=offsets,
        errors=ErrorPolicy(),
        offset_flush_interval_ms=60_000,
    )
    loop.start()
    return loop


def _run_until_sent(loop: WorkerSourceTask, expected_sent: int) -> None:
    for _ in range(200):
        loop.iterate()
        if loop.metrics.sent >= expected_sent:
            return
    raise AssertionError(f"only {loop.metrics.sent} of {expected_sent} records sent")


def test_file_source_to_topic_with_offsets_and_resume(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    _create_topics(broker.bootstrap, "file-lines")
    path = tmp_path / "input.txt"
    path.write_text("".join(f"line-{i}\n" for i in range(100)))

    loop = _loop(broker, path, MemoryOffsetStore())
    _run_until_sent(loop, 100)
    assert loop.close() is True
    loop.stop()
    assert (loop.metrics.sent, loop.metrics.acked, loop.metrics.offset_commits) == (100, 100, 1)

    messages = consume_all(broker.bootstrap, "file-lines", 100)
    assert [json.loads(m.value()) for m in messages] == [
        {"schema": {"type": "string", "optional": False}, "payload": f"line-{i}"}
        for i in range(100)
    ]
    assert all(m.key() is None for m in messages)

    view, raw = read_offsets_topic(broker.bootstrap, OFFSETS_TOPIC, OFFSET_PARTITIONS)
    size = path.stat().st_size
    assert raw == [
        (
            json.dumps(["file-src", {"filename": str(path)}], separators=(",", ":")).encode(),
            b'{"position":%d}' % size,
        )
    ]

    # A restarted task reads the offsets topic and continues after the last committed line.
    with path.open("a") as fh:
        fh.write("".join(f"line-{i}\n" for i in range(100, 110)))
    resumed = _loop(broker, path, view.reader("file-src"))
    _run_until_sent(resumed, 10)
    assert resumed.close() is True
    resumed.stop()
    assert resumed.metrics.sent == 10
    messages = consume_all(broker.bootstrap, "file-lines", 110)
    assert [json.loads(m.value())["payload"] for m in messages] == [f"line-{i}" for i in range(110)]
    del loop, resumed  # drop the producers before the broker stops


def test_uncommitted_records_are_replayed_not_lost(broker: EmbeddedBroker, tmp_path: Path) -> None:
    _create_topics(broker.bootstrap, "file-lines")
    path = tmp_path / "input.txt"
    path.write_text("".join(f"r{i}\n" for i in range(20)))
    offsets = MemoryOffsetStore()
    loop = _loop(broker, path, offsets)
    _run_until_sent(loop, 20)
    loop.sender.flush(10)
    assert loop.commit_offsets() is True  # the first 20 are committed
    with path.open("a") as fh:
        fh.write("".join(f"r{i}\n" for i in range(20, 30)))
    _run_until_sent(loop, 30)
    loop.sender.flush(10)
    loop.stop()  # a crash: the last 10 were produced but their offsets never committed

    view, _ = read_offsets_topic(broker.bootstrap, OFFSETS_TOPIC, OFFSET_PARTITIONS)
    resumed = _loop(broker, path, view.reader("file-src"))
    _run_until_sent(resumed, 10)
    resumed.close()
    resumed.stop()
    values = [
        json.loads(m.value())["payload"] for m in consume_all(broker.bootstrap, "file-lines", 40)
    ]
    assert values == [f"r{i}" for i in range(30)] + [f"r{i}" for i in range(20, 30)]
    print(f"at-least-once replay: {len(values) - 30} duplicates after an uncommitted crash")
    del loop, resumed
