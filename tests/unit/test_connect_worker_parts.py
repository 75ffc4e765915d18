"""Connector instances and their stored task configs; statuses and their REST views."""

from __future__ import annotations

import pytest

from oncelog.connect.api import ConfigDef, SourceConnector, SourceTask
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.connectors.file_stream import FileStreamSinkConnector
from oncelog.connect.connectors.verifiable import VerifiableSourceConnector
from oncelog.connect.runtime.worker_connector import (
    WorkerConnector,
    connector_task_configs,
    task_configs_changed,
)
from oncelog.connect.storage.status_records import (
    ConnectorStatus,
    State,
    StatusTombstone,
    TaskStatus,
    TopicStatus,
)
from oncelog.connect.storage.status_state import StatusState


def test_task_configs_get_task_class_and_sink_topics() -> None:
    sink = FileStreamSinkConnector()
    config = {"name": "s", "connector.class": "FileStreamSink", "file": "/tmp/o", "topics": "a,b"}
    sink.start(config)
    assert connector_task_configs(sink, config, 2) == [
        {
            **config,
            "task.class": "oncelog.connect.connectors.file_stream.FileStreamSinkTask",
            "topics": "a,b",
        }
    ]
    source = VerifiableSourceConnector()
    source_config = {"name": "v", "topic": "t", "throughput": "10"}
    source.start(source_config)
    configs = connector_task_configs(source, source_config, 2)
    assert [(c["id"], c["task.class"]) for c in configs] == [
        ("0", "oncelog.connect.connectors.verifiable.VerifiableSourceTask"),
        ("1", "oncelog.connect.connectors.verifiable.VerifiableSourceTask"),
    ]
    assert not task_configs_changed(configs, [dict(c) for c in configs])
    assert task_configs_changed(configs, configs[:1])
    assert task_configs_changed(configs, [configs[0], {**configs[1], "throughput": "5"}])


class GreedyConnector(SourceConnector):
    """Returns more task configs than allowed, and can fail on start."""

    fail = False

    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        if self.fail:
            raise RuntimeError("cannot reach the source")

    def task_class(self) -> type[SourceTask]:
        return SourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}] * (max_tasks + 1)

    def stop(self) -> None:
        pass


def test_worker_connector_life_cycle() -> None:
    requests: list[str] = []
    greedy = WorkerConnector("g", GreedyConnector(), on_reconfiguration=requests.append)
    assert greedy.start({"name": "g"}) is True
    with pytest.raises(ConnectException, match="has generated 3 tasks, which is greater than 2"):
        greedy.task_configs(2)
    assert greedy.connector.context is not None
    greedy.connector.context.request_task_reconfiguration()
    assert (
        requests == ["g"]
        and greedy.take_reconfiguration_request()
        and not greedy.take_reconfiguration_request()
    )
    greedy.stop()
    assert greedy.running is False

    failing = GreedyConnector()
    failing.fail = True
    broken = WorkerConnector("b", failing)
    assert broken.start({}) is False
    assert str(broken.failure) == "cannot reach the source"


def test_status_state_and_views() -> None:
    state = StatusState()
    state.apply(ConnectorStatus("c", State.RUNNING, "w1:8083", 3))
    state.apply(TaskStatus("c", 1, State.FAILED, "w2:8083", 3, "Traceback: boom"))
    state.apply(TaskStatus("c", 0, State.RUNNING, "w1:8083", 3))
    state.apply(TopicStatus("orders", "c", 0, 1))
    assert state.connector_status_json("c", "source") == {
        "name": "c",
        "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
        "tasks": [
            {"id": 0, "state": "RUNNING", "worker_id": "w1:8083"},
            {"id": 1, "state": "FAILED", "worker_id": "w2:8083", "trace": "Traceback: boom"},
        ],
        "type": "source",
    }
    assert state.task_status_json("c", 1) == {
        "id": 1,
        "state": "FAILED",
        "worker_id": "w2:8083",
        "trace": "Traceback: boom",
    }
    assert state.task_status_json("c", 9) is None and state.connector_status_json("x", None) is None
    assert state.active_topics_json("c") == {"c": {"topics": ["orders"]}}
    # putSafe: another worker with an older or equal generation may not overwrite.
    assert not state.can_write_safely(TaskStatus("c", 0, State.UNASSIGNED, "w9:8083", 3))
    assert state.can_write_safely(TaskStatus("c", 0, State.PAUSED, "w1:8083", 3))
    assert state.can_write_safely(TaskStatus("c", 0, State.RUNNING, "w9:8083", 4))
    assert state.can_write_safely(TaskStatus("c", 7, State.RUNNING, "w9:8083", 0))
    assert state.remove_connector("c") == [
        StatusTombstone("c"),
        StatusTombstone("c", 0),
        StatusTombstone("c", 1),
    ]
    for tombstone in state.remove_connector("c"):
        state.apply(tombstone)
    state.apply(StatusTombstone("c", topic="orders"))
    assert (
        state.connectors == {}
        and state.tasks == {}
        and state.active_topics_json("c") == {"c": {"topics": []}}
    )
