"""One ``oncelog connect worker`` process against a real broker, driven through REST:
start-up (internal topics, ready line, refusing an uncompacted offsets topic), SIGTERM,
REST errors, KIP-875 offsets, a FileStream round trip and an SDK connector found
through ``plugin.path``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from oncelog.connect.kafka_io.internal_topics import TopicLogConsumer
from oncelog.connect.runtime.plugins import FILE_STREAM_PLUGIN
from oncelog.connect.storage.internal_log import InternalTopicReader, LogRecord
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import consume_all
from .test_sdk_plugin import PLUGIN
from .workers import READY_PREFIX, WorkerProcess, free_port, wait_for, worker_settings

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_worker_rest")

GROUP = "solo"

FAILING_PLUGIN = '''
"""A source whose task fails on its first poll, and one whose task fails once it is asked to
stop."""
import time

from oncelog.connect.api import SourceConnector, SourceTask
from oncelog.connect.api.config import ConfigDef


class FailingTask(SourceTask):
    def version(self):
        return "1"

    def start(self, config):
        pass

    def poll(self):
        raise RuntimeError("the source is unreachable")

    def stop(self):
        pass


class FailsOnStopTask(SourceTask):
    """Polls nothing until it is asked to stop; the poll in progress then raises."""

    def version(self):
        return "1"

    def start(self, config):
        self.stopped = False

    def poll(self):
        for _ in range(10):
            if self.stopped:
                raise RuntimeError("the source went away while stopping")
            time.sleep(0.05)
        return []

    def stop(self):
        self.stopped = True


class FailingConnector(SourceConnector):
    def version(self):
        return "1"

    def config_def(self):
        return ConfigDef()

    def start(self, config):
        pass

    def task_class(self):
        return FailingTask

    def task_configs(self, max_tasks):
        return [{} for _ in range(max_tasks)]

    def stop(self):
        pass


class FailsOnStopConnector(FailingConnector):
    def task_class(self):
        return FailsOnStopTask
'''

POISON_PLUGIN = '''
"""A sink writing each value on a line of its file; a batch holding the value "poison" fails
part-way (after the values before it are written) until the file ``healed`` exists."""
import os

from oncelog.connect.api import SinkConnector, SinkTask
from oncelog.connect.api.config import ConfigDef


class PoisonSinkTask(SinkTask):
    def version(self):
        return "1"

    def start(self, config):
        self.path = config["file"]

    def put(self, records):
        healed = os.path.exists(self.path + ".healed")
        with open(self.path, "a") as out:
            for r in records:
                if r.value == "poison" and not healed:
                    raise RuntimeError(f"poison record at offset {r.kafka_offset}")
                out.write(f"{r.value}\\n")

    def stop(self):
        pass


class PoisonSinkConnector(SinkConnector):
    def version(self):
        return "1"

    def config_def(self):
        return ConfigDef()

    def start(self, config):
        self.config = dict(config)

    def task_class(self):
        return PoisonSinkTask

    def task_configs(self, max_tasks):
        return [dict(self.config)]

    def stop(self):
        pass
'''


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[EmbeddedBroker, WorkerProcess, Path]]:
    base = Path(tempfile.mkdtemp(prefix="connect-solo-"))
    plugins = base / "plugins"
    plugins.mkdir()
    (plugins / "counter_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (plugins / "failing_plugin.py").write_text(textwrap.dedent(FAILING_PLUGIN))
    (plugins / "poison_plugin.py").write_text(textwrap.dedent(POISON_PLUGIN))
    broker = EmbeddedBroker(base / "data").start()
    worker = WorkerProcess(
        worker_settings(
            broker.bootstrap, GROUP, **{"plugin.path": f"{plugins},{FILE_STREAM_PLUGIN}"}
        ),
        base / "worker.log",
    )
    try:
        worker.start()
        yield broker, worker, base
    finally:
        worker.kill()
        broker.stop()


def _status(worker: WorkerProcess, name: str) -> dict:
    return worker.get(f"/connectors/{name}/status")


def _running(worker: WorkerProcess, name: str, tasks: int) -> bool:
    status = _status(worker, name)
    return (
        status["connector"]["state"] == "RUNNING"
        and [t["state"] for t in status["tasks"]] == ["RUNNING"] * tasks
    )


def test_start_up_creates_compacted_internal_topics_and_prints_one_ready_line(cluster) -> None:
    broker, worker, _ = cluster
    assert worker.lines == [f"{READY_PREFIX}{worker.url}"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    counts = {
        t: len(topics[t].partitions)
        for t in (f"{GROUP}-configs", f"{GROUP}-offsets", f"{GROUP}-status")
    }
    assert counts == {f"{GROUP}-configs": 1, f"{GROUP}-offsets": 25, f"{GROUP}-status": 5}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in counts]
    for resource, future in admin.describe_configs(resources).items():
        assert future.result(10)["cleanup.policy"].value == "compact", resource
    assert worker.get("/health")["status"] == "healthy"
    assert "version" in worker.get("/")
    paths = worker.get("/openapi.json")["paths"]
    assert sorted(paths["/connectors"]) == ["get", "post"]
    assert sorted(paths["/connectors/{connector}/config"]) == ["get", "patch", "put"]
    assert sorted(paths["/connectors/{connector}/offsets"]) == ["delete", "get", "patch"]
    assert paths["/connectors/{connector}/stop"]["put"]["responses"]["204"]


def test_refuses_an_offsets_topic_that_is_not_compacted(cluster, tmp_path: Path) -> None:
    broker, _, _ = cluster
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("bad-offsets", 25, 1, config={"cleanup.policy": "delete"})])[
        "bad-offsets"
    ].result(10)
    settings = worker_settings(broker.bootstrap, "bad", **{"offset.storage.topic": "bad-offsets"})
    settings["listeners"] = f"http://127.0.0.1:{free_port()}"
    args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "ready" not in done.stdout
    assert (
        "Topic 'bad-offsets' supplied via the 'offset.storage.topic' property is required to have "
        "'cleanup.policy=compact'" in done.stderr
    )
    assert "currently has 'cleanup.policy=delete'" in done.stderr


def test_unknown_worker_setting_fails_at_start_naming_the_key(cluster) -> None:
    broker, _, _ = cluster
    args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
    for key, value in worker_settings(
        broker.bootstrap, "x", **{"offset.flush.intervall.ms": "5"}
    ).items():
        args += ["--set", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'Unknown worker configuration "offset.flush.intervall.ms"' in done.stderr


def test_rest_errors(cluster) -> None:
    _, worker, _ = cluster
    status, body = worker.call("POST", "/connectors", raw=b'{"name": "x", "config": {')
    assert status == 400 and body["error_code"] == 400 and "Malformed JSON" in body["message"]

    status, body = worker.call(
        "POST", "/connectors", {"name": "x", "config": {"connector.class": "NoSuchConnector"}}
    )
    assert status == 400 and "NoSuchConnector" in body["message"]

    status, body = worker.call(
        "POST",
        "/connectors",
        {
            "name": "bad-values",
            "config": {
                "connector.class": "VerifiableSource",
                "tasks.max": "0",
                "throughput": "fast",
                "topic": "t",
            },
        },
    )
    assert status == 400, body
    assert "contains the following 2 error(s)" in body["message"]
    assert "tasks.max: Invalid value 0 for configuration tasks.max" in body["message"]
    assert "throughput: Invalid value fast for configuration throughput" in body["message"]

    for method, path in (
        ("GET", "/connectors/nope"),
        ("GET", "/connectors/nope/status"),
        ("PUT", "/connectors/nope/pause"),
        ("PUT", "/connectors/nope/stop"),
        ("POST", "/connectors/nope/restart"),
        ("DELETE", "/connectors/nope"),
        ("GET", "/connectors/nope/offsets"),
    ):
        status, body = worker.call(method, path)
        assert (status, body) == (
            404,
            {"error_code": 404, "message": "Connector nope not found"},
        ), path
    status, body = worker.call("PATCH", "/connectors/nope/config", {"tasks.max": "2"})
    assert status == 404

    config = {"connector.class": "VerifiableSource", "throughput": "1", "topic": "conflict"}
    assert worker.call("POST", "/connectors", {"name": "dup", "config": config})[0] == 201
    status, body = worker.call("POST", "/connectors", {"name": "dup", "config": config})
    assert (status, body) == (409, {"error_code": 409, "message": "Connector dup already exists"})
    assert worker.call("DELETE", "/connectors/dup")[0] == 204
    wait_for(lambda: "dup" not in worker.get("/connectors"), 20, "dup deleted")
    status, body = worker.call("GET", "/no/such/path")
    assert status == 404 and body["error_code"] == 404


def test_kip875_offsets_read_alter_reset_only_while_stopped(cluster) -> None:
    broker, worker, _ = cluster
    config = {
        "connector.class": "VerifiableSource",
        "throughput": "200",
        "topic": "offsets-t",
        "tasks.max": "1",
    }
    assert worker.call("POST", "/connectors", {"name": "src", "config": config})[0] == 201
    wait_for(lambda: _running(worker, "src", 1), 30, "src running")
    offsets = wait_for(lambda: worker.get("/connectors/src/offsets")["offsets"], 30, "offsets")
    assert offsets[0]["partition"] == {"id": 0} and offsets[0]["offset"]["seqno"] >= 0

    patch = {"offsets": [{"partition": {"id": 0}, "offset": {"seqno": 100000}}]}
    status, body = worker.call("PATCH", "/connectors/src/offsets", patch)
    assert status == 400 and "must be in the STOPPED state" in body["message"]
    assert worker.call("DELETE", "/connectors/src/offsets")[0] == 400

    assert worker.call("PUT", "/connectors/src/stop")[0] == 204
    wait_for(lambda: _status(worker, "src")["connector"]["state"] == "STOPPED", 30, "stopped")
    wait_for(lambda: worker.get("/connectors/src/tasks") == [], 30, "no tasks while stopped")
    status, body = worker.call("PATCH", "/connectors/src/offsets", patch)
    assert status == 200, body
    assert "offsets for this connector have been altered" in body["message"]
    assert worker.get("/connectors/src/offsets") == {
        "offsets": [{"partition": {"id": 0}, "offset": {"seqno": 100000}}]
    }

    # Resumed, the task continues after the altered offset.
    assert worker.call("PUT", "/connectors/src/resume")[0] == 202
    wait_for(lambda: _running(worker, "src", 1), 30, "src running again")
    records = consume_all(broker.bootstrap, "offsets-t", 10**9, timeout_s=4)
    seqnos = [json.loads(m.value())["seqno"] for m in records]
    assert 100001 in seqnos and 100000 not in seqnos

    assert worker.call("PUT", "/connectors/src/stop")[0] == 204
    wait_for(lambda: _status(worker, "src")["connector"]["state"] == "STOPPED", 30, "stopped")
    status, body = worker.call("DELETE", "/connectors/src/offsets")
    assert status == 200 and "have been reset" in body["message"]
    assert worker.get("/connectors/src/offsets") == {"offsets": []}
    assert worker.call("DELETE", "/connectors/src")[0] == 204


def test_file_stream_source_to_topic_to_file_stream_sink(cluster) -> None:
    _, worker, base = cluster
    source_file, sink_file = base / "in.txt", base / "out.txt"
    lines = [f"line {i} ü" for i in range(50)]
    source_file.write_text("".join(f"{line}\n" for line in lines))
    source = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": "lines"}
    sink = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": "lines"}
    assert worker.call("POST", "/connectors", {"name": "fs-src", "config": source})[0] == 201
    assert worker.call("PUT", "/connectors/fs-sink/config", sink)[0] == 201
    wait_for(
        lambda: sink_file.exists() and sink_file.read_text().splitlines() == lines,
        40,
        "sink file complete",
    )
    assert worker.get("/connectors/fs-src/offsets") == {
        "offsets": [
            {
                "partition": {"filename": str(source_file)},
                "offset": {"position": len(source_file.read_bytes())},
            }
        ]
    }
    wait_for(
        lambda: (
            worker.get("/connectors/fs-sink/offsets")
            == {
                "offsets": [
                    {
                        "partition": {"kafka_topic": "lines", "kafka_partition": 0},
                        "offset": {"kafka_offset": 50},
                    }
                ]
            }
        ),
        30,
        "sink offsets committed",
    )
    # Appended lines flow through too.
    with source_file.open("a") as fh:
        fh.write("one more\n")
    wait_for(lambda: sink_file.read_text().splitlines() == [*lines, "one more"], 30, "appended")

    # KIP-875 on a sink: its consumer group's offsets, changed while STOPPED.
    assert worker.call("PUT", "/connectors/fs-sink/stop")[0] == 204
    wait_for(
        lambda: _status(worker, "fs-sink")["tasks"] == [],
        30,
        "sink task stopped: a STOPPED connector lists no tasks (its consumer left the group)",
    )
    lines_0 = {"kafka_topic": "lines", "kafka_partition": 0}
    status, body = worker.call(
        "PATCH",
        "/connectors/fs-sink/offsets",
        {"offsets": [{"partition": lines_0, "offset": {"kafka_offset": 10}}]},
    )
    assert status == 200, body
    assert worker.get("/connectors/fs-sink/offsets") == {
        "offsets": [{"partition": lines_0, "offset": {"kafka_offset": 10}}]
    }
    status, body = worker.call("DELETE", "/connectors/fs-sink/offsets")
    assert status == 200 and "have been reset" in body["message"], body
    assert worker.get("/connectors/fs-sink/offsets") == {"offsets": []}
    for name in ("fs-src", "fs-sink"):
        assert worker.call("DELETE", f"/connectors/{name}")[0] == 204


def test_sdk_connector_from_plugin_path_through_rest(cluster) -> None:
    broker, worker, _ = cluster
    classes = [p["class"] for p in worker.get("/connector-plugins")]
    assert "counter_plugin.CounterConnector" in classes
    config = {"connector.class": "CounterConnector", "topic": "numbers", "limit": "20"}
    status, body = worker.call("POST", "/connectors", {"name": "counter", "config": config})
    assert status == 201, body
    records = consume_all(broker.bootstrap, "numbers", 20)
    assert sorted(json.loads(m.value())["n"] for m in records) == list(range(20))
    wait_for(
        lambda: (
            worker.get("/connectors/counter/offsets")
            == {"offsets": [{"partition": {"counter": "main"}, "offset": {"n": 19}}]}
        ),
        30,
        "counter offsets",
    )
    assert worker.call("DELETE", "/connectors/counter")[0] == 204


def test_sigterm_stops_the_worker_gracefully(cluster) -> None:
    broker, _, base = cluster
    worker = WorkerProcess(worker_settings(broker.bootstrap, "term"), base / "term.log").start()
    try:
        config = {"connector.class": "VerifiableSource", "throughput": "50", "topic": "term-t"}
        assert worker.call("POST", "/connectors", {"name": "v", "config": config})[0] == 201
        wait_for(lambda: _running(worker, "v", 1), 30, "running")
        started = time.monotonic()
        assert worker.terminate(timeout_s=3 + 5) == 0
        assert time.monotonic() - started < 3 + 5
    finally:
        worker.kill()


def test_failed_tasks_report_the_trace_and_restart_only_failed(cluster) -> None:
    _, worker, _ = cluster
    config = {"connector.class": "FailingConnector", "tasks.max": "2"}
    assert worker.call("POST", "/connectors", {"name": "failing", "config": config})[0] == 201
    wait_for(
        lambda: [t["state"] for t in _status(worker, "failing")["tasks"]] == ["FAILED"] * 2,
        30,
        "tasks failed",
    )
    task = worker.get("/connectors/failing/tasks/0/status")
    assert "RuntimeError: the source is unreachable" in task["trace"]
    assert _status(worker, "failing")["connector"]["state"] == "RUNNING"

    status, body = worker.call(
        "POST", "/connectors/failing/restart?includeTasks=true&onlyFailed=true"
    )
    assert status == 202, body
    assert body["connector"]["state"] == "RUNNING"  # not failed: not restarted
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING"] * 2
    assert all("trace" not in t for t in body["tasks"])
    # Restarted, the tasks fail again on their first poll: the status topic shows
    # FAILED, RESTARTING, RUNNING, FAILED for each.
    broker = cluster[0]
    for task in (0, 1):
        wait_for(
            lambda task=task: (
                task_history(broker, "failing", task)[-4:]
                == ["FAILED", "RESTARTING", "RUNNING", "FAILED"]
            ),
            30,
            f"task {task} restarted and failed again",
        )
    assert worker.call("DELETE", "/connectors/failing")[0] == 204


def test_an_error_while_stopping_is_no_failure(cluster) -> None:
    """Kafka's WorkerTask: a task that throws after its stop was asked for is logged, not
    reported FAILED, so a restarted task is never shown failed by its predecessor."""
    broker, worker, base = cluster
    config = {"connector.class": "FailsOnStopConnector", "tasks.max": "1"}
    assert worker.call("POST", "/connectors", {"name": "stopfail", "config": config})[0] == 201
    wait_for(lambda: _running(worker, "stopfail", 1), 30, "task running")
    assert worker.call("POST", "/connectors/stopfail/tasks/0/restart")[0] == 204
    wait_for(
        lambda: task_history(broker, "stopfail", 0)[-3:] == ["RUNNING", "UNASSIGNED", "RUNNING"],
        30,
        "task restarted",
    )
    assert "FAILED" not in task_history(broker, "stopfail", 0)
    assert _running(worker, "stopfail", 1)
    log = (base / "worker.log").read_text()
    assert "stopfail-0: the task failed while stopping" in log
    assert "RuntimeError: the source went away while stopping" in log
    assert worker.call("DELETE", "/connectors/stopfail")[0] == 204


def task_history(broker: EmbeddedBroker, connector: str, task: int) -> list[str]:
    """The states the status topic held for a task, oldest first."""
    key = f"status-task-{connector}-{task}".encode()
    states: list[str] = []

    def apply(record: LogRecord) -> None:
        if record.key == key and record.value:
            states.append(json.loads(record.value)["state"])

    consumer = TopicLogConsumer({"bootstrap.servers": broker.bootstrap})
    try:
        reader = InternalTopicReader(consumer, f"{GROUP}-status", apply)
        reader.start()
        reader.read_to_end(10)
    finally:
        consumer.close()
    return states


def test_sink_task_failing_mid_batch_loses_nothing(cluster) -> None:
    """put() fails part-way through a batch (non-retriable): the task is FAILED with the
    cause in its trace, the batch's offsets are not committed, and once the cause is gone a
    task restart redelivers the whole batch (at least once: nothing lost, in order)."""
    broker, worker, base = cluster
    values = [f"v{i}" for i in range(10)] + ["poison"] + [f"v{i}" for i in range(11, 20)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        producer.produce("poisoned", json.dumps(v).encode())
    assert producer.flush(10) == 0
    out = base / "poisoned.txt"
    config = {"connector.class": "PoisonSinkConnector", "topics": "poisoned", "file": str(out)}
    assert worker.call("PUT", "/connectors/poison-sink/config", config)[0] == 201
    wait_for(
        lambda: [t["state"] for t in _status(worker, "poison-sink")["tasks"]] == ["FAILED"],
        30,
        "task failed",
    )
    trace = worker.get("/connectors/poison-sink/tasks/0/status")["trace"]
    assert "RuntimeError: poison record at offset 10" in trace
    assert out.read_text().splitlines() == values[:10]  # written up to the poison record
    time.sleep(1.5)  # three offset.flush.interval.ms: nothing of the failed batch commits
    assert worker.get("/connectors/poison-sink/offsets") == {"offsets": []}

    (base / "poisoned.txt.healed").touch()
    status, _ = worker.call("POST", "/connectors/poison-sink/tasks/0/restart")
    assert status == 204
    wait_for(lambda: len(out.read_text().splitlines()) == 30, 30, "batch redelivered")
    assert out.read_text().splitlines() == values[:10] + values  # again from offset 0
    wait_for(
        lambda: (
            worker.get("/connectors/poison-sink/offsets")
            == {
                "offsets": [
                    {
                        "partition": {"kafka_topic": "poisoned", "kafka_partition": 0},
                        "offset": {"kafka_offset": 20},
                    }
                ]
            }
        ),
        30,
        "offsets committed after the restart",
    )
    assert [t["state"] for t in _status(worker, "poison-sink")["tasks"]] == ["RUNNING"]
    assert worker.call("DELETE", "/connectors/poison-sink")[0] == 204


def test_sink_task_failing_in_start_is_stopped_cleanly(cluster) -> None:
    """A FileStreamSink whose file cannot be opened: FAILED with the cause; the worker then
    closes the task (Kafka calls stop() after a failed start too) without a second error."""
    _, worker, base = cluster
    config = {
        "connector.class": "FileStreamSink",
        "topics": "lines",
        "file": str(base / "no-such-dir" / "out.txt"),
    }
    assert worker.call("PUT", "/connectors/bad-file/config", config)[0] == 201
    wait_for(
        lambda: [t["state"] for t in _status(worker, "bad-file")["tasks"]] == ["FAILED"],
        30,
        "task failed",
    )
    trace = worker.get("/connectors/bad-file/tasks/0/status")["trace"]
    assert trace.splitlines()[-1] == (
        f"FileNotFoundError: [Errno 2] No such file or directory: '{config['file']}'"
    )
    assert worker.call("DELETE", "/connectors/bad-file")[0] == 204
    log = worker.log_path.read_text()
    assert "bad-file-0: closing the failed task failed" not in log


def test_prometheus_metrics_on_the_rest_listener(cluster) -> None:
    """GET /metrics: per-task counters of a FileStream source and sink, and their status."""
    from ..metrics_scrape import scrape, value

    _, worker, base = cluster
    source_file, sink_file = base / "metrics-in.txt", base / "metrics-out.txt"
    lines = [f"m{i}" for i in range(30)]
    source_file.write_text("".join(f"{line}\n" for line in lines))
    source = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": "mlines"}
    sink = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": "mlines"}
    assert worker.call("POST", "/connectors", {"name": "m-src", "config": source})[0] == 201
    assert worker.call("POST", "/connectors", {"name": "m-sink", "config": sink})[0] == 201
    wait_for(lambda: sink_file.exists() and sink_file.read_text().splitlines() == lines, 40, "sink")
    src = {"connector": "m-src", "task": "0", "type": "source"}
    snk = {"connector": "m-sink", "task": "0", "type": "sink"}
    s = wait_for(
        lambda: (
            (s := scrape(worker.url.rstrip("/")))
            and value(s, "oncelog_connect_source_records_acked_total", **src) == 30
            and value(s, "oncelog_connect_sink_records_sent_total", **snk) == 30
            and s
        ),
        30,
        "counters",
    )
    assert value(s, "oncelog_connect_source_records_polled_total", **src) == 30
    assert value(s, "oncelog_connect_source_records_written_total", **src) == 30
    assert value(s, "oncelog_connect_sink_records_read_total", **snk) == 30
    assert value(s, "oncelog_connect_records_skipped_total", **snk) == 0
    assert value(s, "oncelog_connect_connector_status", connector="m-src", state="RUNNING") == 1
    assert (
        value(s, "oncelog_connect_task_status", connector="m-sink", task="0", state="RUNNING") == 1
    )
    assert value(s, "oncelog_connect_worker_tasks") >= 2
    # docs/metrics.md lists every family the worker exports.
    docs = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    assert {name for name in s if name not in docs} == set()
    for name in ("m-src", "m-sink"):
        assert worker.call("DELETE", f"/connectors/{name}")[0] == 204
