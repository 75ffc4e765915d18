"""FileStream and Verifiable connectors, run at the task level (no worker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncelog.connect.api import ExactlyOnceSupport, partition_key
from oncelog.connect.api.data import STRING_SCHEMA
from oncelog.connect.api.errors import ConfigException, ConnectException
from oncelog.connect.api.records import SinkRecord, SourceRecord, TopicPartition
from oncelog.connect.connectors.file_stream import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from oncelog.connect.connectors.verifiable import (
    VerifiableSinkTask,
    VerifiableSourceConnector,
    VerifiableSourceTask,
)
from oncelog.connect.runtime.task_context import BasicSinkTaskContext, BasicSourceTaskContext
from oncelog.connect.storage.offsets import MemoryOffsetStore


def _source_task(
    task: FileStreamSourceTask | VerifiableSourceTask,
    config: dict[str, str],
    store: MemoryOffsetStore,
) -> None:
    task.initialize(BasicSourceTaskContext(config, store))
    task.start(config)


def _commit(store: MemoryOffsetStore, records: list[SourceRecord]) -> None:
    store.commit({partition_key(r.source_partition or {}): r.source_offset for r in records})


def test_file_source_reads_complete_lines_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"alpha\r\nbeta\ngam")
    config = {"file": str(path), "topic": "lines", "batch.size": "10"}
    store = MemoryOffsetStore()
    task = FileStreamSourceTask()
    _source_task(task, config, store)
    records = task.poll() or []
    assert [
        (r.topic, r.value, r.value_schema, r.source_partition, r.source_offset) for r in records
    ] == [
        ("lines", "alpha", STRING_SCHEMA, {"filename": str(path)}, {"position": 7}),
        ("lines", "beta", STRING_SCHEMA, {"filename": str(path)}, {"position": 12}),
    ]
    assert task.poll() is None  # "gam" has no newline yet
    with path.open("ab") as fh:
        fh.write(b"ma\ndelta\n")
    more = task.poll() or []
    assert [(r.value, r.source_offset) for r in more] == [
        ("gamma", {"position": 18}),
        ("delta", {"position": 24}),
    ]
    _commit(store, records)  # only the first batch's offsets were committed
    task.stop()

    restarted = FileStreamSourceTask()
    _source_task(restarted, config, store)
    assert [r.value for r in restarted.poll() or []] == ["gamma", "delta"]
    restarted.stop()


def test_file_source_batch_size_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    task = FileStreamSourceTask()
    _source_task(task, {"file": str(path), "topic": "t", "batch.size": "2"}, MemoryOffsetStore())
    task.stop()  # stop() interrupts the wait for the missing file
    task._stopping.clear()
    assert task.poll() is None
    path.write_text("1\n2\n3\n")
    assert [r.value for r in task.poll() or []] == ["1", "2"]
    assert [r.value for r in task.poll() or []] == ["3"]
    task.stop()


def test_file_source_connector_config_and_offsets() -> None:
    connector = FileStreamSourceConnector()
    errors = {k: v.errors for k, v in connector.validate({"topic": "", "batch.size": "0"}).items()}
    assert errors == {
        "file": [],
        "topic": ["Invalid value  for configuration topic: String must be non-empty"],
        "batch.size": ["Invalid value 0 for configuration batch.size: Value must be at least 1"],
    }
    connector.start({"file": "/tmp/x", "topic": "t"})
    assert connector.task_configs(5) == [{"file": "/tmp/x", "topic": "t"}]
    assert connector.exactly_once_support({"file": "/tmp/x"}) is ExactlyOnceSupport.SUPPORTED
    assert connector.exactly_once_support({}) is ExactlyOnceSupport.UNSUPPORTED
    assert (
        connector.alter_offsets({}, {partition_key({"filename": "/tmp/x"}): {"position": 10}})
        is True
    )
    with pytest.raises(ConnectException, match="must be a non-negative integer"):
        connector.alter_offsets({}, {partition_key({"filename": "/tmp/x"}): {"position": -1}})
    with pytest.raises(ConnectException, match="must contain the 'filename' key"):
        connector.alter_offsets({}, {partition_key({"file": "/tmp/x"}): {"position": 1}})


def test_file_sink_appends_values(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    connector = FileStreamSinkConnector()
    connector.start({"file": str(out), "topics": "t"})
    assert connector.task_configs(3) == [{"file": str(out), "topics": "t"}]
    task = FileStreamSinkTask()
    task.initialize(BasicSinkTaskContext({"file": str(out)}))
    task.start({"file": str(out)})
    task.put([SinkRecord.create("t", 0, i, v) for i, v in enumerate(["a", {"k": 1}, 5, b"raw"])])
    tp = TopicPartition("t", 0)
    assert task.pre_commit({tp: 4}) == {tp: 4}
    assert out.read_text() == 'a\n{"k":1}\n5\nraw\n'
    task.stop()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_verifiable_source_throttles_and_resumes() -> None:
    connector = VerifiableSourceConnector()
    connector.start({"topic": "verify", "throughput": "10", "name": "v"})
    configs = connector.task_configs(3)
    assert [c["id"] for c in configs] == ["0", "1", "2"]
    assert configs[1]["topic"] == "verify"

    clock = FakeClock()
    store = MemoryOffsetStore()
    task = VerifiableSourceTask(clock=clock, wall_ms=lambda: 1234)
    _source_task(task, configs[1], store)
    first = task.poll() or []
    assert [(r.key, r.value, r.source_partition, r.source_offset) for r in first] == [
        (1, {"task": 1, "seqno": 0, "time_ms": 1234}, {"id": 1}, {"seqno": 0})
    ]
    clock.now += 0.5  # 10 records/s: five more are due
    batch = task.poll() or []
    assert [r.value["seqno"] for r in batch] == [1, 2, 3, 4, 5]
    _commit(store, first + batch)
    task.stop()

    resumed = VerifiableSourceTask(clock=clock, wall_ms=lambda: 0)
    _source_task(resumed, configs[1], store)
    assert [r.value["seqno"] for r in resumed.poll() or []] == [6]
    resumed.stop()


def test_verifiable_source_unthrottled_batches_and_config_errors() -> None:
    task = VerifiableSourceTask()
    _source_task(
        task, {"topic": "v", "throughput": "-1", "batch.size": "50", "id": "0"}, MemoryOffsetStore()
    )
    assert len(task.poll() or []) == 50
    with pytest.raises(
        ConfigException,
        match="Invalid value 0 for configuration throughput: Must be positive, or -1 for no limit",
    ):
        VerifiableSourceConnector().start({"topic": "v", "throughput": "0"})
    with pytest.raises(ConfigException, match='Missing required configuration "throughput"'):
        VerifiableSourceConnector().start({"topic": "v"})


def test_verifiable_sink_records_what_it_saw(tmp_path: Path) -> None:
    out = tmp_path / "seen.jsonl"
    task = VerifiableSinkTask()
    task.initialize(BasicSinkTaskContext({}))
    task.start({"id": "2", "file": str(out)})
    task.put([SinkRecord.create("v", 0, 7, {"task": 0, "seqno": 3}, key=0)])
    task.flush({})
    task.stop()
    expected = {
        "task": 2,
        "topic": "v",
        "partition": 0,
        "offset": 7,
        "key": 0,
        "value": {"task": 0, "seqno": 3},
    }
    assert task.seen == [expected]
    assert [json.loads(line) for line in out.read_text().splitlines()] == [expected]


def test_sink_context_tracks_requests() -> None:
    ctx = BasicSinkTaskContext({"a": "b"})
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    ctx.set_assignment({tp0, tp1})
    ctx.pause(tp0, tp1)
    ctx.resume(tp1)
    assert ctx.paused() == {tp0}
    with pytest.raises(ConnectException, match="not assigned: t-5"):
        ctx.pause(TopicPartition("t", 5))
    ctx.offset({tp1: 10})
    ctx.request_commit()
    assert ctx.take_offset_resets() == {tp1: 10} and ctx.take_offset_resets() == {}
    assert ctx.take_commit_request() is True and ctx.take_commit_request() is False
    ctx.set_assignment({tp1})
    assert ctx.paused() == set() and ctx.assignment() == {tp1}
