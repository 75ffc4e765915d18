"""KIP-618 zombie fencing with ``oncelog connect worker`` processes on one broker
(``exactly.once.source.support=enabled``): the signed internal ``PUT
/connectors/{c}/fence``, task-count records in the config topic, the fencing of the
previous generation's task producers on reconfiguration (3 -> 1 -> 3 tasks), restarts,
and a leader that is paused until another worker leads.

The tasks are real exactly-once VerifiableSource tasks (transactional ids
``<group>-<connector>-<task>``): the tests follow their producers' epochs
(DescribeTransactions) to see whom the leader fenced, and when, and check that the
committed output has each task's seqnos exactly once. Stand-in "zombie" producers only
take transactional ids that no live task uses."""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.connect.distributed import request_signing
from oncelog.connect.storage import config_records
from oncelog.connect.storage.config_records import SessionKeyRecord
from oncelog.embedded import EmbeddedBroker

from .workers import WorkerProcess, leader_and_followers, roles, wait_for, worker_settings

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_exactly_once_fencing")

GROUP = "eosfence"
CONFIG_TOPIC = f"{GROUP}-configs"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[EmbeddedBroker, list[WorkerProcess]]]:
    base = Path(tempfile.mkdtemp(prefix="connect-eos-fence-"))
    broker = EmbeddedBroker(base / "data").start()
    settings = worker_settings(
        broker.bootstrap, GROUP, **{"exactly.once.source.support": "enabled"}
    )
    workers = [WorkerProcess(settings, base / f"worker{i}.log") for i in range(2)]
    try:
        for worker in workers:
            worker.start()
        yield broker, workers
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()


# -- helpers -------------------------------------------------------------------------------


def config_topic(bootstrap: str, isolation: str = "read_committed") -> list[tuple[str, Any, int]]:
    """Every record of the config topic: (key, decoded value or None, timestamp ms)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(CONFIG_TOPIC, 0), timeout=10)[1]
        consumer.assign([TopicPartition(CONFIG_TOPIC, 0, 0)])
        out: list[tuple[str, Any, int]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                position = consumer.position([TopicPartition(CONFIG_TOPIC, 0)])[0].offset
                if position >= end:
                    break
                continue
            assert msg.error() is None, msg.error()
            value = None if msg.value() is None else json.loads(msg.value())
            out.append((msg.key().decode(), value, msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def fencing_history(records: list[tuple[str, Any, int]], name: str) -> list[str]:
    """The connector's commit and task-count records in topic order."""
    out = []
    for key, value, _ in records:
        if key == f"commit-{name}":
            out.append(f"commit {value['tasks']}")
        elif key == f"tasks-fencing-{name}":
            out.append(f"count {value['task-count']}")
    return out


def session_key(bootstrap: str) -> bytes:
    keys = [
        config_records.decode(k, json.dumps(v).encode())
        for k, v, _ in config_topic(bootstrap)
        if k == config_records.SESSION_KEY_KEY
    ]
    assert keys, "no session key in the config topic"
    key = keys[-1]
    assert isinstance(key, SessionKeyRecord)
    return key.key


def put_fence(worker: WorkerProcess, name: str, headers: dict[str, str]) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{worker.url}/connectors/{name}/fence",
        data=b"",
        method="PUT",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=100) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def task_states(worker: WorkerProcess, name: str) -> list[str | None]:
    """The states of the connector's current tasks (statuses of removed tasks linger)."""
    configured = [t["id"]["task"] for t in worker.get(f"/connectors/{name}/tasks")]
    states = {t["id"]: t["state"] for t in worker.get(f"/connectors/{name}/status")["tasks"]}
    return [states.get(task) for task in configured]


def wait_states(worker: WorkerProcess, name: str, states: list[str], timeout_s: float = 60) -> None:
    def check() -> bool:
        assert task_states(worker, name) == states
        return True

    wait_for(check, timeout_s, f"{name} tasks {states}")


def assert_fenced(producer: Producer, topic: str) -> None:
    with pytest.raises(KafkaException) as info:
        producer.produce(topic, value=b"after fencing")
        producer.flush(10)
        producer.commit_transaction(10)
    error = info.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED, error


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    idle = time.monotonic() + 2
    while time.monotonic() < idle:
        msg = consumer.poll(0.3)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
            idle = time.monotonic() + 2
    consumer.close()
    return out


def create_source(worker: WorkerProcess, name: str, tasks: int, topic: str) -> None:
    config = {
        "connector.class": "VerifiableSource",
        "throughput": "20",
        "topic": topic,
        "tasks.max": str(tasks),
    }
    status, body = worker.call("PUT", f"/connectors/{name}/config", config)
    assert status in (200, 201), body


# -- tests ---------------------------------------------------------------------------------


def test_fence_endpoint_signing_forwarding_and_task_count_records(cluster) -> None:
    broker, workers = cluster
    leader, (follower,) = leader_and_followers(workers)
    create_source(follower, "sig", 2, "eos-sig")
    wait_states(leader, "sig", ["RUNNING", "RUNNING"])
    # First generation: nothing to fence, a task-count record after the task configs.
    assert fencing_history(config_topic(broker.bootstrap), "sig") == ["commit 2", "count 2"]

    for worker in (leader, follower):
        assert put_fence(worker, "sig", {}) == (
            400,
            {"error_code": 400, "message": "Internal request missing required signature"},
        )
        forged = request_signing.sign(b"not the session key" * 2, b"")
        assert put_fence(worker, "sig", forged) == (
            403,
            {"error_code": 403, "message": "Internal request contained invalid signature."},
        )
    signed = request_signing.sign(session_key(broker.bootstrap), b"")
    assert put_fence(leader, "sig", signed) == (204, None)
    assert put_fence(follower, "sig", signed) == (204, None)  # forwarded, signature kept
    status, body = put_fence(follower, "missing", signed)
    assert (status, body["message"]) == (404, "Connector missing not found")
    # Already fenced: no new record.
    assert fencing_history(config_topic(broker.bootstrap), "sig") == ["commit 2", "count 2"]
    status, _ = leader.call("DELETE", "/connectors/sig")
    assert status == 204


def test_reconfiguration_fences_the_previous_generation_before_new_tasks_start(cluster) -> None:
    """3 -> 1 -> 3 tasks of a real exactly-once VerifiableSource: each reconfiguration
    fences the previous generation's task producers (their epochs move past the ones
    their tasks used) before the task-count record, the new tasks start after it, and
    the committed output has every (task, seqno) once, each task's seqnos rising by 1."""
    broker, workers = cluster
    leader, (follower,) = leader_and_followers(workers)
    name, out = "recon", "eos-recon"
    ids = [f"{GROUP}-{name}-{t}" for t in range(3)]
    history = ["commit 3", "count 3"]
    create_source(leader, name, 3, out)
    try:
        wait_states(leader, name, ["RUNNING"] * 3)
        wait_for(lambda: _tasks_since(broker.bootstrap, out, 0) >= {0, 1, 2}, 30, "3 tasks")
        running = _epochs(broker.bootstrap, ids)  # the epochs the 3 live tasks produce with

        # 3 -> 1: the leader fences the producers of tasks 0, 1 and 2, then writes the record.
        create_source(follower, name, 1, out)
        history += ["commit 1", "count 1"]
        count_ts = _wait_history(broker.bootstrap, name, history)
        wait_states(leader, name, ["RUNNING"])
        wait_for(lambda: 0 in _tasks_since(broker.bootstrap, out, count_ts), 30, "new task 0")
        fenced = _epochs(broker.bootstrap, ids)
        # Task 0's worker stopped its old task before asking for the fencing: one bump for
        # the fencing, one for the new task's own InitProducerId.
        assert fenced[ids[0]] == running[ids[0]] + 2
        # Tasks 1 and 2 run no more: one bump for the fencing, two when the fencing caught
        # the old task (on the other worker, not stopped yet) with a transaction open.
        for tid in ids[1:]:
            assert fenced[tid] in (running[tid] + 1, running[tid] + 2), (tid, running, fenced)

        # Zombies of tasks 1 and 2 (their old tasks are gone, no live task uses the ids):
        # each holds a transaction with a record that would duplicate the task's seqno 0.
        zombies = [zombie_task(broker.bootstrap, ids[t], out, t) for t in (1, 2)]
        before = _epochs(broker.bootstrap, ids)
        assert before == {**fenced, ids[1]: fenced[ids[1]] + 1, ids[2]: fenced[ids[2]] + 1}

        # 1 -> 3: the leader fences the single producer of the 1-task generation; the new
        # tasks 1 and 2 fence the zombies themselves (aborting their transactions).
        create_source(leader, name, 3, out)
        history += ["commit 3", "count 3"]
        count_ts = _wait_history(broker.bootstrap, name, history)
        wait_states(leader, name, ["RUNNING"] * 3)
        wait_for(
            lambda: _tasks_since(broker.bootstrap, out, count_ts) >= {0, 1, 2}, 30, "new tasks"
        )
        for producer in zombies:
            assert_fenced(producer, out)
        assert _epochs(broker.bootstrap, ids) == {tid: before[tid] + 2 for tid in ids}

        # Tasks 1 and 2 did not run in the 1-task generation: their first records of the new
        # generation come after its task-count record.
        records = config_topic(broker.bootstrap)
        last_count_ts = [ts for k, _, ts in records if k == f"tasks-fencing-{name}"][-1]
        last_commit_ts = [ts for k, _, ts in records if k == f"commit-{name}"][-1]
        new_records = _task_records(broker.bootstrap, out, last_commit_ts)
        assert {task for task, _ in new_records} >= {1, 2}
        assert min(ts for task, ts in new_records if task in (1, 2)) >= last_count_ts
    finally:
        status, _ = leader.call("DELETE", f"/connectors/{name}")
    assert status == 204
    assert fencing_history(config_topic(broker.bootstrap), name) == history
    # Exactly once across both reconfigurations: per task, seqnos 0, 1, 2, ... in order.
    seqnos: dict[int, list[int]] = {}
    for value in committed_values(broker.bootstrap, out):
        record = json.loads(value)
        seqnos.setdefault(record["task"], []).append(record["seqno"])
    assert sorted(seqnos) == [0, 1, 2]
    for task, seen in seqnos.items():
        assert seen == list(range(len(seen))), (task, seen)


def _epochs(bootstrap: str, ids: list[str]) -> dict[str, int]:
    with TxnAdmin(ClientConfig.of(bootstrap)) as txns:
        return {tid: txns.describe_txn(tid).producer_epoch for tid in ids}


def _wait_history(bootstrap: str, name: str, history: list[str]) -> int:
    """Waits for the connector's fencing history; the timestamp of its last record."""
    wait_for(lambda: fencing_history(config_topic(bootstrap), name) == history, 60, str(history))
    return [ts for k, _, ts in config_topic(bootstrap) if k == f"tasks-fencing-{name}"][-1]


def _tasks_since(bootstrap: str, topic: str, since_ms: int) -> set[int]:
    return {task for task, _ in _task_records(bootstrap, topic, since_ms)}


def zombie_task(bootstrap: str, transactional_id: str, topic: str, task: int) -> Producer:
    """A producer under an earlier task's transactional id with a transaction open that
    holds the task's seqno 0 again."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=str(task).encode(), value=json.dumps({"task": task, "seqno": 0}))
    producer.flush(10)
    return producer


def _task_records(bootstrap: str, topic: str, since_ms: int) -> list[tuple[int, int]]:
    """(task, timestamp) of the records produced at or after ``since_ms``, up to the end
    offsets of now (the tasks keep producing)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in partitions
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions if ends[p] > 0])
    remaining = {p for p in partitions if ends[p] > 0}
    out = []
    deadline = time.monotonic() + 30
    while remaining and time.monotonic() < deadline:
        msg = consumer.poll(0.3)
        if msg is None or msg.error() is not None:
            continue
        if msg.offset() >= ends[msg.partition()] - 1:
            remaining.discard(msg.partition())
        if msg.offset() < ends[msg.partition()] and msg.timestamp()[1] >= since_ms:
            out.append((json.loads(msg.value())["task"], msg.timestamp()[1]))
    consumer.close()
    assert not remaining, f"read of {topic} stalled"
    return out


def test_restart_of_an_exactly_once_source_task(cluster) -> None:
    broker, workers = cluster
    leader, (follower,) = leader_and_followers(workers)
    create_source(leader, "rs", 2, "eos-rs")
    wait_states(leader, "rs", ["RUNNING"] * 2)
    for t in (0, 1):
        assert follower.call("POST", f"/connectors/rs/tasks/{t}/restart") == (204, None)
    wait_states(leader, "rs", ["RUNNING"] * 2)
    status, body = follower.call("POST", "/connectors/rs/tasks/7/restart")
    assert (status, body["message"]) == (404, "Task rs-7 not found")
    # Restarts start no new generation: nothing more to fence.
    assert fencing_history(config_topic(broker.bootstrap), "rs") == ["commit 2", "count 2"]
    assert leader.call("DELETE", "/connectors/rs")[0] == 204


def test_paused_leader_is_fenced_out_of_the_config_topic(cluster) -> None:
    broker, workers = cluster
    old, (other,) = leader_and_followers(workers)
    create_source(other, "before", 1, "eos-before")
    wait_states(other, "before", ["RUNNING"])
    assert old.proc is not None
    generation = roles(workers)[old.url][0]
    old.proc.send_signal(signal.SIGSTOP)
    answers: list[tuple[int, Any]] = []
    try:
        wait_for(
            lambda: (
                roles([other]).get(other.url, (0, ""))[1] == "leader"
                and roles([other])[other.url][0] > generation
            ),
            60,
            "the other worker leads",
        )
        # The new leader claimed the config topic (fencing the paused one) and writes.
        create_source(other, "during", 1, "eos-during")
        # A request the paused leader will serve when it wakes up, still believing it leads.
        caller = threading.Thread(
            target=lambda: answers.append(
                old.call(
                    "PUT",
                    "/connectors/zombie/config",
                    {"connector.class": "VerifiableSource", "topic": "z", "throughput": "1"},
                    retry_rebalance_s=0,
                )
            )
        )
        caller.start()
        time.sleep(1)
    finally:
        old.proc.send_signal(signal.SIGCONT)
    caller.join(120)
    leader, _ = leader_and_followers(workers)
    assert leader is other
    # The zombie's write failed (fenced: 500), or it learnt first that it no longer leads
    # (409), or it had rejoined and forwarded the request to the new leader (201).
    status, body = answers[0]
    assert status in (201, 409, 500), (status, body)
    if status == 500:
        assert "Failed to write to the config topic" in body["message"], body
        assert "fencable write to the config topic failed" in old.log_path.read_text()
    if status == 201:
        # Its task is fenced in (a task-count record, in a transaction) before it runs:
        # read the topic once that transaction is over.
        wait_states(other, "zombie", ["RUNNING"])
    # The config topic stays valid: every record decodes, the connectors agree everywhere.
    records = config_topic(broker.bootstrap)
    for key, value, _ in records:
        config_records.decode(key, None if value is None else json.dumps(value).encode())
    connectors = sorted(
        k.removeprefix("connector-") for k, v, _ in records if k.startswith("connector-") and v
    )
    expected = ["before", "during"] + (["zombie"] if status == 201 else [])
    assert [c for c in connectors if c in ("before", "during", "zombie")] == expected
    # Every worker lists the connectors the topic holds now (earlier tests' included).
    live: dict[str, bool] = {}
    for key, value, _ in records:
        if key.startswith("connector-"):
            live[key.removeprefix("connector-")] = value is not None
    current = sorted(c for c, alive in live.items() if alive)
    assert {"before", "during"} <= set(current)
    wait_for(
        lambda: [sorted(w.get("/connectors")) for w in workers] == [current] * len(workers),
        60,
        f"workers agree on {current}",
    )
    # Only committed transactions of the leaders are in the topic: read_uncommitted sees
    # the same records plus nothing a fenced leader could still slip in.
    uncommitted = config_topic(broker.bootstrap, "read_uncommitted")
    assert [k for k, _, _ in uncommitted] == [k for k, _, _ in records]
    wait_states(other, "during", ["RUNNING"])


@pytest.mark.slow  # over a minute of waiting: make test-slow runs it
def test_failed_fencing_fails_the_tasks_with_the_error(cluster) -> None:
    """The leader cannot fence (the connector's admin settings point nowhere): the
    tasks of the new generation are FAILED with the leader's 500 as their trace and do
    not start; once the connector is fixed, the next round fences and they run."""
    broker, workers = cluster
    leader, (follower,) = leader_and_followers(workers)
    name = "unfenceable"
    create_source(leader, name, 2, "eos-unfenceable")
    wait_states(leader, name, ["RUNNING"] * 2)
    broken = {
        "connector.class": "VerifiableSource",
        "throughput": "20",
        "topic": "eos-unfenceable",
        "tasks.max": "3",
        "admin.override.bootstrap.servers": "127.0.0.1:1",
    }
    assert leader.call("PUT", f"/connectors/{name}/config", broken)[0] == 200
    wait_states(leader, name, ["FAILED"] * 3, timeout_s=150)
    traces = [t["trace"] for t in leader.get(f"/connectors/{name}/status")["tasks"][:3]]
    assert all("Failed to fence out producers" in t for t in traces), traces
    assert all(f"{GROUP}-{name}-0" in t and f"{GROUP}-{name}-1" in t for t in traces)
    # No task-count record for the unfenced generation.
    assert fencing_history(config_topic(broker.bootstrap), name) == [
        "commit 2",
        "count 2",
        "commit 3",
    ]
    fixed = {k: v for k, v in broken.items() if not k.startswith("admin.")}
    assert follower.call("PUT", f"/connectors/{name}/config", fixed)[0] == 200
    wait_states(leader, name, ["RUNNING"] * 3, timeout_s=90)
    assert fencing_history(config_topic(broker.bootstrap), name) == [
        "commit 2",
        "count 2",
        "commit 3",
        "commit 3",
        "count 3",
    ]
    assert leader.call("DELETE", f"/connectors/{name}")[0] == 204


def test_fence_endpoint_refuses_sinks_and_answers_503_before_a_session_key(
    cluster, tmp_path: Path
) -> None:
    broker, workers = cluster
    leader, (follower,) = leader_and_followers(workers)
    config = {"connector.class": "VerifiableSink", "topics": "eos-sink-in", "tasks.max": "1"}
    assert leader.call("POST", "/connectors", {"name": "a-sink", "config": config})[0] == 201
    signed = request_signing.sign(session_key(broker.bootstrap), b"")
    for worker in (leader, follower):  # the follower forwards to the leader
        assert put_fence(worker, "a-sink", signed) == (
            400,
            {"error_code": 400, "message": "Connector a-sink is not a source connector"},
        )
    assert leader.call("DELETE", "/connectors/a-sink")[0] == 204

    # A worker whose group is held by a consumer group cannot join, so it never reads a
    # session key: its REST API serves, and internal requests get 503.
    holder = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "held"})
    holder.subscribe([CONFIG_TOPIC])
    wait_for(lambda: holder.poll(0.2) is None and holder.assignment(), 30, "the group held")
    starting = WorkerProcess(
        worker_settings(broker.bootstrap, "held", **{"exactly.once.source.support": "enabled"}),
        tmp_path / "starting.log",
    )
    try:
        starting.start(wait_ready=False)

        def answer() -> tuple[int, Any] | None:
            try:
                return put_fence(starting, "any", signed)
            except OSError:
                return None  # not listening yet

        status, body = wait_for(answer, 60, "the REST listener")
        assert (status, body) == (
            503,
            {
                "error_code": 503,
                "message": "This worker is still starting up and has not been able to read "
                "a session key from the config topic yet",
            },
        )
        assert not starting.ready.is_set()
    finally:
        starting.kill()
        holder.close()
