"""The worker runs connectors and task threads against a real broker: statuses
(RUNNING, PAUSED, UNASSIGNED, FAILED with the trace), pause/resume, converters from
the worker config, and VerifiableSource seqnos without gaps."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict

from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.connect.api import ConfigDef, SourceConnector, SourceRecord, SourceTask
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.offsets import OffsetsView
from oncelog.connect.storage.status_records import State, TaskStatus
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import ConfluentClients, StatusList, consume_all


class BoomTask(SourceTask):
    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        raise RuntimeError("boom")

    def stop(self) -> None:
        pass


class BoomConnector(SourceConnector):
    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return BoomTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def stop(self) -> None:
        pass


SLOW_START_RELEASE = threading.Event()


class SlowStartTask(BoomTask):
    """Its start() waits until the test releases it, then it fails on demand."""

    def start(self, config: dict[str, str]) -> None:
        assert SLOW_START_RELEASE.wait(30), "never released"
        if config.get("fail.on.start") == "true":
            raise RuntimeError("start failed")

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.05)
        return None


class SlowStartConnector(BoomConnector):
    def task_class(self) -> type[SourceTask]:
        return SlowStartTask


def _worker(broker: EmbeddedBroker, statuses: StatusList) -> Worker:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [
        NewTopic("verify", 1, 1),
        NewTopic("connect-offsets", 5, 1, config={"cleanup.policy": "compact"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(15)
    config = WorkerConfig(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "cluster",
            "config.storage.topic": "c",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "s",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter": "JsonConverter",
            "value.converter.schemas.enable": "false",
            "offset.flush.interval.ms": "200",
            "task.shutdown.graceful.timeout.ms": "5000",
        }
    )
    plugins = PluginRegistry.with_builtins()
    plugins.register_module(sys.modules[__name__])  # only registered classes resolve
    return Worker("w1:8083", config, plugins, ConfluentClients(broker.bootstrap, "connect-offsets"),
                  OffsetsView(), statuses, generation=lambda: 3)  # fmt: skip


def _seqno(worker: Worker, task: int) -> int:
    offset = worker.offsets.reader("v").offset({"id": task})
    return -1 if offset is None else int(offset["seqno"])


def _wait(predicate: object, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached")


def test_worker_runs_pauses_resumes_and_stops_tasks(broker: EmbeddedBroker) -> None:
    statuses = StatusList()
    worker = _worker(broker, statuses)
    config = {
        "name": "v",
        "connector.class": "VerifiableSource",
        "topic": "verify",
        "throughput": "500",
        "tasks.max": "2",
    }
    assert worker.start_connector("v", config, TargetState.STARTED)
    task_configs = worker.connector_task_configs("v", 2)
    assert [c["task.class"] for c in task_configs] == [
        "oncelog.connect.connectors.verifiable.VerifiableSourceTask"
    ] * 2
    for i, task_config in enumerate(task_configs):
        assert worker.start_task(ConnectorTaskId("v", i), config, task_config, TargetState.STARTED)
    _wait(lambda: _seqno(worker, 0) >= 20 and _seqno(worker, 1) >= 20)

    worker.transition_task(ConnectorTaskId("v", 0), TargetState.PAUSED)
    time.sleep(0.5)  # let a commit in flight land
    paused_at = _seqno(worker, 0)
    time.sleep(1.0)
    assert _seqno(worker, 0) == paused_at  # nothing moves while paused
    assert _seqno(worker, 1) > 20
    worker.transition_task(ConnectorTaskId("v", 0), TargetState.STARTED)
    _wait(lambda: _seqno(worker, 0) > paused_at + 10)

    assert worker.stop_task(ConnectorTaskId("v", 0)) and worker.stop_task(ConnectorTaskId("v", 1))
    worker.stop_connector("v")
    task0 = [
        (s.state, s.worker_id, s.generation)
        for s in statuses
        if isinstance(s, TaskStatus) and s.task == 0
    ]
    assert task0 == [
        (State.RUNNING, "w1:8083", 3),
        (State.PAUSED, "w1:8083", 3),
        (State.RUNNING, "w1:8083", 3),
        (State.UNASSIGNED, "w1:8083", 3),
    ]
    assert [s.state for s in statuses if not isinstance(s, TaskStatus)] == [
        State.RUNNING,
        State.UNASSIGNED,
    ]

    # Every record the tasks produced is in the topic: per task, seqnos 0..n without gaps.
    last = {t: _seqno(worker, t) for t in (0, 1)}
    messages = consume_all(broker.bootstrap, "verify", last[0] + last[1] + 2)
    seen: dict[int, list[int]] = defaultdict(list)
    for m in messages:
        value = json.loads(m.value())
        assert json.loads(m.key()) == value["task"]
        seen[value["task"]].append(value["seqno"])
    for task in (0, 1):
        assert seen[task] == list(range(len(seen[task])))  # in order, no gap, no duplicate
        assert len(seen[task]) - 1 >= last[task]


def test_failing_task_reports_its_trace(broker: EmbeddedBroker) -> None:
    statuses = StatusList()
    worker = _worker(broker, statuses)
    config = {"name": "b", "connector.class": f"{__name__}.BoomConnector"}
    assert worker.start_connector("b", config, TargetState.STARTED)
    [task_config] = worker.connector_task_configs("b", 1)
    assert task_config["task.class"] == f"{__name__}.BoomTask"
    assert worker.start_task(ConnectorTaskId("b", 0), config, task_config, TargetState.STARTED)
    _wait(lambda: any(isinstance(s, TaskStatus) and s.state is State.FAILED for s in statuses))
    failed = next(s for s in statuses if isinstance(s, TaskStatus) and s.state is State.FAILED)
    assert failed.trace is not None and "RuntimeError: boom" in failed.trace
    assert worker.task_failure(ConnectorTaskId("b", 0)) == failed.trace
    worker.stop_task(ConnectorTaskId("b", 0))
    assert [s.state for s in statuses if isinstance(s, TaskStatus)] == [State.RUNNING, State.FAILED]
    # A task class that cannot be found fails at start, with the reason.
    assert not worker.start_task(
        ConnectorTaskId("b", 1), config, {"task.class": "no.such.Task"}, TargetState.STARTED
    )
    last = statuses[-1]
    assert (
        isinstance(last, TaskStatus)
        and last.state is State.FAILED
        and "no.such.Task could not be found" in (last.trace or "")
    )


def test_task_start_runs_on_the_task_thread(broker: EmbeddedBroker) -> None:
    """start_task returns at once even while the task's start() blocks (Kafka starts a
    task on its own thread: the herder must not wait for it). RUNNING is reported once
    start() returned, a pause meanwhile is reported as PAUSED, a failing start is FAILED
    with its trace, and a task stopped during start() is not reported FAILED."""
    statuses = StatusList()
    worker = _worker(broker, statuses)
    config = {"name": "slow", "connector.class": f"{__name__}.SlowStartConnector"}
    assert worker.start_connector("slow", config, TargetState.STARTED)
    [task_config] = worker.connector_task_configs("slow", 1)
    SLOW_START_RELEASE.clear()
    began = time.monotonic()
    ok, bad, cut = (ConnectorTaskId("slow", i) for i in range(3))
    assert worker.start_task(ok, config, task_config, TargetState.STARTED)
    assert worker.start_task(
        bad, config, {**task_config, "fail.on.start": "true"}, TargetState.STARTED
    )
    assert worker.start_task(
        cut, config, {**task_config, "fail.on.start": "true"}, TargetState.STARTED
    )
    assert time.monotonic() - began < 2
    time.sleep(0.5)
    assert [s for s in statuses if isinstance(s, TaskStatus)] == []  # none has started yet
    worker.transition_task(ok, TargetState.PAUSED)
    stopper = threading.Thread(target=worker.stop_task, args=(cut,))
    stopper.start()
    time.sleep(0.2)
    SLOW_START_RELEASE.set()
    stopper.join(10)
    _wait(lambda: worker.task_failure(bad) is not None)

    def states(task: ConnectorTaskId) -> list[State]:
        return [s.state for s in statuses if isinstance(s, TaskStatus) and s.task == task.task]

    _wait(lambda: states(ok) == [State.PAUSED])
    assert states(bad) == [State.FAILED]
    assert "RuntimeError: start failed" in (worker.task_failure(bad) or "")
    assert states(cut) == [State.UNASSIGNED]
    worker.stop_tasks([ok, bad])
    worker.stop_connector("slow")
