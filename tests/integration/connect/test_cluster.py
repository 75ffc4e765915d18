"""Three ``oncelog connect worker`` processes on one broker, driven through REST:
the connector life cycle, agreement between workers, forwarding to the leader, and a
SIGKILLed worker whose tasks move to the survivors and resume from stored offsets."""

from __future__ import annotations

import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import consume_all
from .workers import WorkerProcess, wait_for, worker_settings

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_cluster")

GROUP = "trio"


@pytest.fixture(scope="module")
def trio() -> Iterator[tuple[EmbeddedBroker, list[WorkerProcess], Path]]:
    base = Path(tempfile.mkdtemp(prefix="connect-trio-"))
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


def _agreed(workers: list[WorkerProcess], path: str) -> object:
    """The body every worker answers for ``path``, once they all answer the same."""
    bodies = [w.get(path) for w in workers]
    assert all(b == bodies[0] for b in bodies), bodies
    return bodies[0]


def _states(workers: list[WorkerProcess], name: str) -> tuple[str, list[str]]:
    status = _agreed(workers, f"/connectors/{name}/status")
    assert isinstance(status, dict)
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def _wait_states(
    workers: list[WorkerProcess], name: str, connector: str, tasks: list[str], timeout_s: float = 40
) -> None:
    wait_for(
        lambda: _states(workers, name) == (connector, tasks),
        timeout_s,
        f"{name} {connector} {tasks}",
    )


def test_life_cycle_through_rest_with_forwarding(trio) -> None:
    _, workers, base = trio
    w0, w1, w2 = workers
    config = {
        "connector.class": "VerifiableSource",
        "throughput": "20",
        "topic": "life",
        "tasks.max": "3",
    }
    status, body = w1.call("POST", "/connectors", {"name": "v", "config": config})
    assert status == 201, body
    _wait_states(workers, "v", "RUNNING", ["RUNNING"] * 3)
    # Work is spread: each worker runs one task.
    task_owners = {t["worker_id"] for t in w0.get("/connectors/v/status")["tasks"]}
    assert task_owners == {w.url.removeprefix("http://") for w in workers}
    assert _agreed(workers, "/connectors/v/config") == {**config, "name": "v"}
    tasks = _agreed(workers, "/connectors/v/tasks")
    assert [t["id"] for t in tasks] == [{"connector": "v", "task": i} for i in range(3)]

    assert w2.call("PUT", "/connectors/v/pause")[0] == 202
    _wait_states(workers, "v", "PAUSED", ["PAUSED"] * 3)
    assert w0.call("PUT", "/connectors/v/resume")[0] == 202
    _wait_states(workers, "v", "RUNNING", ["RUNNING"] * 3)

    status, body = w1.call("PUT", "/connectors/v/config", {**config, "tasks.max": "1"})
    assert status == 200, body
    wait_for(lambda: len(_agreed(workers, "/connectors/v/tasks")) == 1, 40, "one task")
    status, body = w2.call("PATCH", "/connectors/v/config", {"tasks.max": "3"})
    assert status == 200 and body["config"]["tasks.max"] == "3", body
    wait_for(lambda: len(_agreed(workers, "/connectors/v/tasks")) == 3, 40, "three tasks")
    _wait_states(workers, "v", "RUNNING", ["RUNNING"] * 3)

    status, body = w0.call("POST", "/connectors/v/restart?includeTasks=true")
    assert status == 202, body
    assert body["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING"] * 3
    _wait_states(workers, "v", "RUNNING", ["RUNNING"] * 3)
    assert w1.call("POST", "/connectors/v/restart")[0] == 204

    owner_of_1 = w0.get("/connectors/v/tasks/1/status")["worker_id"]
    other = next(w for w in workers if w.url.removeprefix("http://") != owner_of_1)
    assert other.call("POST", "/connectors/v/tasks/1/restart")[0] == 204
    assert other.call("POST", "/connectors/v/tasks/7/restart")[0] == 404

    assert w1.call("PUT", "/connectors/v/stop")[0] == 204
    wait_for(lambda: _agreed(workers, "/connectors/v/tasks") == [], 40, "no tasks when stopped")
    wait_for(lambda: _states(workers, "v")[0] == "STOPPED", 40, "stopped")

    assert w2.call("DELETE", "/connectors/v")[0] == 204
    wait_for(lambda: _agreed(workers, "/connectors") == [], 40, "deleted everywhere")
    for w in workers:
        assert w.call("GET", "/connectors/v/status")[0] == 404

    # With forward=false a follower may not forward: only the leader answers (404 here).
    # Pause is served by whichever worker receives it (Kafka's AbstractHerder): 404 everywhere.
    wait_for(
        lambda: (
            sorted(
                w.call("DELETE", "/connectors/nope?forward=false", retry_rebalance_s=0)[0]
                for w in workers
            )
            == [404, 409, 409]
        ),
        30,
        "only the leader serving forward=false",
    )

    # Writes sent to followers reached the leader: it logged forwarded requests.
    logs = "".join((base / f"worker{i}.log").read_text() for i in range(3))
    assert "forward=true" in logs


def test_sigkilled_worker_tasks_resume_on_survivors_without_gaps(trio) -> None:
    broker, workers, _ = trio
    config = {
        "connector.class": "VerifiableSource",
        "throughput": "100",
        "topic": "kill",
        "tasks.max": "3",
    }
    assert workers[0].call("POST", "/connectors", {"name": "k", "config": config})[0] == 201
    _wait_states(workers, "k", "RUNNING", ["RUNNING"] * 3)
    victim = workers[2]
    victim_id = victim.url.removeprefix("http://")
    wait_for(
        lambda: any(
            t["worker_id"] == victim_id for t in workers[0].get("/connectors/k/status")["tasks"]
        ),
        30,
        "victim runs a task",
    )
    wait_for(lambda: workers[0].get("/connectors/k/offsets")["offsets"], 30, "offsets stored")
    victim.kill()
    survivors = workers[:2]
    survivor_ids = {w.url.removeprefix("http://") for w in survivors}

    def moved() -> bool:
        status = survivors[0].get("/connectors/k/status")
        tasks = status["tasks"]
        return len(tasks) == 3 and all(
            t["state"] == "RUNNING" and t["worker_id"] in survivor_ids for t in tasks
        )

    # Session timeout (6 s) plus scheduled.rebalance.max.delay.ms (3 s) and the rejoin.
    wait_for(moved, 60, "tasks moved to the survivors")
    wait_for(
        lambda: all(
            o["offset"]["seqno"] > 0 for o in survivors[0].get("/connectors/k/offsets")["offsets"]
        ),
        30,
        "offsets advanced",
    )
    assert survivors[1].call("PUT", "/connectors/k/stop")[0] == 204
    wait_for(lambda: _agreed(survivors, "/connectors/k/tasks") == [], 40, "stopped")

    records = consume_all(broker.bootstrap, "kill", 10**9, timeout_s=5)
    seqnos: dict[int, list[int]] = defaultdict(list)
    for message in records:
        value = json.loads(message.value())
        seqnos[value["task"]].append(value["seqno"])
    assert sorted(seqnos) == [0, 1, 2]
    duplicates = 0
    for task, seen in sorted(seqnos.items()):
        counts = Counter(seen)
        missing = set(range(max(seen) + 1)) - set(counts)
        assert not missing, f"task {task} lost seqnos {sorted(missing)[:10]}"
        duplicates += sum(c - 1 for c in counts.values())
        print(
            f"task {task}: {len(counts)} distinct seqnos, {sum(c - 1 for c in counts.values())} duplicates"
        )
    print(f"duplicates after SIGKILL: {duplicates}")


def _leader(base: Path, count: int) -> int:
    """Which worker's log last says it joined as leader."""
    latest: tuple[str, int] | None = None
    for i in range(count):
        for line in (base / f"leader{i}.log").read_text().splitlines():
            if " as leader " in line and (latest is None or line[:23] >= latest[0]):
                latest = (line[:23], i)
    assert latest is not None
    return latest[1]


@pytest.mark.slow
def test_sigkilled_leader_tasks_resume_on_survivors_without_gaps(tmp_path: Path) -> None:
    broker = EmbeddedBroker(tmp_path / "data").start()
    workers = [
        WorkerProcess(worker_settings(broker.bootstrap, "lead"), tmp_path / f"leader{i}.log")
        for i in range(3)
    ]
    try:
        for worker in workers:
            worker.start()
        config = {
            "connector.class": "VerifiableSource",
            "throughput": "100",
            "topic": "lead",
            "tasks.max": "6",
        }
        assert workers[1].call("POST", "/connectors", {"name": "k", "config": config})[0] == 201
        _wait_states(workers, "k", "RUNNING", ["RUNNING"] * 6, 60)
        victim = _leader(tmp_path, 3)
        workers[victim].kill()
        survivors = [w for i, w in enumerate(workers) if i != victim]
        survivor_ids = {w.url.removeprefix("http://") for w in survivors}
        wait_for(
            lambda: all(
                t["state"] == "RUNNING" and t["worker_id"] in survivor_ids
                for t in survivors[0].get("/connectors/k/status")["tasks"]
            ),
            60,
            "tasks moved off the dead leader",
        )
        # The survivors elected a new leader that serves writes.
        assert survivors[0].call("PUT", "/connectors/k/stop")[0] == 204
        wait_for(lambda: _agreed(survivors, "/connectors/k/tasks") == [], 40, "stopped")
        seqnos: dict[int, set[int]] = defaultdict(set)
        records = consume_all(broker.bootstrap, "lead", 10**9, timeout_s=5)
        for message in records:
            value = json.loads(message.value())
            seqnos[value["task"]].add(value["seqno"])
        assert sorted(seqnos) == list(range(6))
        for task, seen in seqnos.items():
            assert seen == set(range(max(seen) + 1)), f"task {task} lost seqnos"
        print(f"leader kill: {len(records) - sum(map(len, seqnos.values()))} duplicates")
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()
