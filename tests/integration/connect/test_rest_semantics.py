"""Kafka Connect's REST and status semantics, on three ``oncelog connect worker``
processes and one broker, each answer asserted exactly:

- statuses of deleted tasks are removed (``DistributedHerder.updateDeletedTaskStatus``):
  a STOPPED connector lists no tasks on any worker; ``tasks.max`` 3 -> 1 -> 3 lists
  exactly 1, then 3;
- writes sent back to back to different workers, each starting a rebalance, are queued
  and served with Kafka's status codes: never 409;
- an unknown connector is 404 for every verb, also while the group rebalances;
- a follower whose connector's task configs meet a rebalance keeps its membership;
- KIP-558: the topics a source wrote and a sink read, and their reset;
- ``GET /`` names the Kafka cluster.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker

from .workers import WorkerProcess, wait_for, worker_settings

pytestmark = pytest.mark.xdist_group("test_rest_semantics")

GROUP = "semantics"


@pytest.fixture(scope="module")
def trio() -> Iterator[tuple[EmbeddedBroker, list[WorkerProcess], Path]]:
    base = Path(tempfile.mkdtemp(prefix="connect-semantics-"))
    broker = EmbeddedBroker(base / "data").start()
    workers = [
        WorkerProcess(worker_settings(broker.bootstrap, GROUP), base / f"worker{i}.log")
        for i in range(3)
    ]
    try:
        for worker in workers:
            worker.start()
        yield broker, workers, base
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()


def _source(topic: str, tasks: int = 3) -> dict[str, str]:
    return {
        "connector.class": "VerifiableSource",
        "throughput": "20",
        "topic": topic,
        "tasks.max": str(tasks),
    }


def _status_everywhere(workers: list[WorkerProcess], name: str) -> list[tuple[str, list[str]]]:
    out = []
    for worker in workers:
        status, body = worker.call("GET", f"/connectors/{name}/status", retry_rebalance_s=0)
        assert status == 200, (worker.url, status, body)
        out.append((body["connector"]["state"], [t["state"] for t in body["tasks"]]))
    return out


def _wait_everywhere(
    workers: list[WorkerProcess], name: str, connector: str, tasks: list[str], timeout_s: float = 40
) -> None:
    wait_for(
        lambda: _status_everywhere(workers, name) == [(connector, tasks)] * len(workers),
        timeout_s,
        f"{name}: {connector} {tasks} on every worker",
    )


def test_stopped_connectors_and_fewer_tasks_list_exactly_the_tasks_that_exist(trio) -> None:
    _, workers, _ = trio
    w0, w1, w2 = workers
    assert (
        w0.call("POST", "/connectors", {"name": "s", "config": _source("s")}, retry_rebalance_s=0)[
            0
        ]
        == 201
    )
    _wait_everywhere(workers, "s", "RUNNING", ["RUNNING"] * 3)

    assert w1.call("PUT", "/connectors/s/stop", retry_rebalance_s=0) == (204, None)
    _wait_everywhere(workers, "s", "STOPPED", [])
    assert w2.get("/connectors/s/tasks") == []

    assert w2.call("PUT", "/connectors/s/resume", retry_rebalance_s=0) == (202, None)
    _wait_everywhere(workers, "s", "RUNNING", ["RUNNING"] * 3)

    status, _ = w0.call(
        "PUT", "/connectors/s/config", {**_source("s"), "tasks.max": "1"}, retry_rebalance_s=0
    )
    assert status == 200
    _wait_everywhere(workers, "s", "RUNNING", ["RUNNING"])
    assert [t["id"] for t in w1.get("/connectors/s/status")["tasks"]] == [0]

    status, _ = w1.call("PUT", "/connectors/s/config", _source("s"), retry_rebalance_s=0)
    assert status == 200
    _wait_everywhere(workers, "s", "RUNNING", ["RUNNING"] * 3)
    assert w2.call("DELETE", "/connectors/s", retry_rebalance_s=0) == (204, None)
    for worker in workers:
        wait_for(lambda w=worker: w.call("GET", "/connectors/s/status")[0] == 404, 30, "deleted")


def test_writes_back_to_back_at_different_workers_are_queued_not_refused(trio) -> None:
    _, workers, _ = trio
    answers: list[tuple[str, int]] = []
    expected: list[tuple[str, int]] = []
    step = 0

    def send(method: str, path: str, body: object, status: int) -> None:
        nonlocal step
        worker = workers[step % 3]
        step += 1
        got, answer = worker.call(method, path, body, retry_rebalance_s=0)
        answers.append((f"{method} {path}", got))
        expected.append((f"{method} {path}", status))
        assert got != 409, (method, path, answer)

    for i in range(4):
        name = f"b{i}"
        send("POST", "/connectors", {"name": name, "config": _source(f"b{i}", 1)}, 201)
        send("PUT", f"/connectors/{name}/config", _source(f"b{i}", 2), 200)
        send("PUT", f"/connectors/{name}/pause", None, 202)
        send("PUT", f"/connectors/{name}/resume", None, 202)
        send("PUT", f"/connectors/{name}/stop", None, 204)
    assert len(answers) == 20
    for i in range(4):
        send("DELETE", f"/connectors/b{i}", None, 204)
    assert answers == expected
    for worker in workers:
        wait_for(lambda w=worker: w.get("/connectors") == [], 40, "all deleted")


UNKNOWN = [
    ("GET", "/connectors/nope", None),
    ("GET", "/connectors/nope/config", None),
    ("PATCH", "/connectors/nope/config", {"tasks.max": "2"}),
    ("GET", "/connectors/nope/status", None),
    ("GET", "/connectors/nope/tasks", None),
    ("GET", "/connectors/nope/tasks/0/status", None),
    ("POST", "/connectors/nope/tasks/0/restart", None),
    ("GET", "/connectors/nope/topics", None),
    ("PUT", "/connectors/nope/topics/reset", None),
    ("PUT", "/connectors/nope/pause", None),
    ("PUT", "/connectors/nope/resume", None),
    ("PUT", "/connectors/nope/stop", None),
    ("POST", "/connectors/nope/restart", None),
    ("POST", "/connectors/nope/restart?includeTasks=true", None),
    ("DELETE", "/connectors/nope", None),
    ("GET", "/connectors/nope/offsets", None),
    (
        "PATCH",
        "/connectors/nope/offsets",
        {"offsets": [{"partition": {"a": 1}, "offset": {"b": 1}}]},
    ),
    ("DELETE", "/connectors/nope/offsets", None),
]


def test_an_unknown_connector_is_404_for_every_verb_even_while_rebalancing(trio) -> None:
    _, workers, _ = trio
    stop = threading.Event()

    def churn() -> None:  # every config write starts a rebalance
        i = 0
        while not stop.is_set():
            name = f"churn{i % 2}"
            workers[i % 3].call("POST", "/connectors", {"name": name, "config": _source(name, 1)})
            workers[(i + 1) % 3].call("DELETE", f"/connectors/{name}")
            i += 1

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for round_ in range(2):
            for worker in workers:
                for method, path, body in UNKNOWN:
                    status, answer = worker.call(method, path, body, retry_rebalance_s=0)
                    assert status == 404, (round_, worker.url, method, path, status, answer)
    finally:
        stop.set()
        thread.join(60)


def test_follower_task_configs_meeting_rebalances_cost_no_membership(trio) -> None:
    """Connectors created at once on a busy group: followers send their task configs to
    the leader while rebalances run. Nobody is evicted, every task runs."""
    _, workers, base = trio
    marks = [len(w.log_path.read_text()) for w in workers]
    names = [f"many{i}" for i in range(6)]
    for i, name in enumerate(names):
        status, _ = workers[i % 3].call(
            "POST", "/connectors", {"name": name, "config": _source(name, 2)}, retry_rebalance_s=0
        )
        assert status == 201
    for name in names:
        _wait_everywhere(workers, name, "RUNNING", ["RUNNING"] * 2, timeout_s=90)
    owners = {
        w.get(f"/connectors/{n}/status")["connector"]["worker_id"]
        for n in names
        for w in workers[:1]
    }
    assert len(owners) > 1, "connectors ran on followers too"
    for worker, mark in zip(workers, marks, strict=True):
        log = worker.log_path.read_text()[mark:]
        assert "UNKNOWN_MEMBER_ID" not in log.upper(), worker.log_tail()
        assert "herder tick failed" not in log
    for i, name in enumerate(names):
        assert workers[i % 3].call("DELETE", f"/connectors/{name}", retry_rebalance_s=0)[0] == 204


def test_active_topics_of_a_source_and_a_sink_and_their_reset(trio) -> None:
    _, workers, base = trio
    w0, w1, w2 = workers
    assert (
        w0.call("POST", "/connectors", {"name": "tsrc", "config": _source("tracked", 1)})[0] == 201
    )
    sink = {
        "connector.class": "FileStreamSink",
        "file": str(base / "tracked.sink.txt"),
        "topics": "tracked",
    }
    assert w1.call("POST", "/connectors", {"name": "tsink", "config": sink})[0] == 201
    for worker in workers:
        wait_for(
            lambda w=worker: w.get("/connectors/tsrc/topics") == {"tsrc": {"topics": ["tracked"]}},
            40,
            "source topics",
        )
        wait_for(
            lambda w=worker: (
                w.get("/connectors/tsink/topics") == {"tsink": {"topics": ["tracked"]}}
            ),
            40,
            "sink topics",
        )
    # Reset a stopped connector: nothing writes the topic again.
    assert w2.call("PUT", "/connectors/tsrc/stop")[0] == 204
    assert w2.call("PUT", "/connectors/tsrc/topics/reset") == (202, None)
    for worker in workers:
        wait_for(
            lambda w=worker: w.get("/connectors/tsrc/topics") == {"tsrc": {"topics": []}},
            30,
            "reset",
        )
    assert w0.get("/connectors/tsink/topics") == {"tsink": {"topics": ["tracked"]}}
    for name in ("tsrc", "tsink"):
        assert w0.call("DELETE", f"/connectors/{name}")[0] == 204


def test_root_names_the_kafka_cluster(trio) -> None:
    _, workers, _ = trio
    body = workers[0].get("/")
    assert (
        body["kafka_cluster_id"]
        and body["kafka_cluster_id"] == workers[2].get("/")["kafka_cluster_id"]
    )
    assert set(body) == {"version", "commit", "kafka_cluster_id"}
