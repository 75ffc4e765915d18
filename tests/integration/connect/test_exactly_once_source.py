"""Exactly-once source connectors (KIP-618) on ``oncelog connect worker`` processes and
a real broker: preflight validation, the three transaction boundaries as a
read_committed consumer sees them, the transaction-size metrics, and a task that
writes to its own offsets topic."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker

from .eos_connectors import PREFIX, fibonacci
from .kafka_adapters import read_to_end
from .workers import WorkerProcess, wait_for, worker_settings

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_exactly_once_source")

EOS_GROUP = "eos"
ALOS_GROUP = "alos"

NOT_ENABLED = "This worker does not have exactly-once source support enabled."
UNKNOWN_SUPPORT = (
    "The connector does not implement the API required for preflight validation of "
    "exactly-once source support. Please consult the documentation for the connector to "
    "determine whether it supports exactly-once semantics, and then consider reconfiguring "
    'the connector to use the value "requested" for this property (which will disable this '
    "preflight check and allow the connector to be created)."
)
UNSUPPORTED = (
    "The connector does not support exactly-once semantics with the provided configuration."
)
NO_BOUNDARIES = (
    "The connector does not support connector-defined transaction boundaries with the given "
    "configuration. Please reconfigure it to use a different transaction boundary definition."
)
NULL_BOUNDARIES = (
    "This connector has returned a null value from its canDefineTransactionBoundaries "
    "method, which is not permitted. The connector will be treated as if it cannot define "
    "its own transaction boundaries, and cannot be configured with 'transaction.boundary' "
    "set to 'connector'."
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[EmbeddedBroker, WorkerProcess, WorkerProcess]]:
    base = Path(tempfile.mkdtemp(prefix="connect-eos-"))
    broker = EmbeddedBroker(base / "data").start()
    eos = WorkerProcess(
        worker_settings(broker.bootstrap, EOS_GROUP, **{"exactly.once.source.support": "enabled"}),
        base / "eos.log",
    )
    alos = WorkerProcess(worker_settings(broker.bootstrap, ALOS_GROUP), base / "alos.log")
    try:
        eos.start()
        alos.start()
        yield broker, eos, alos
    finally:
        eos.kill()
        alos.kill()
        broker.stop()


def _errors(result: dict[str, Any]) -> dict[str, list[str]]:
    return {
        c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]
    }


def _validate(worker: WorkerProcess, config: dict[str, str]) -> dict[str, list[str]]:
    plugin = config["connector.class"]
    status, body = worker.call("PUT", f"/connector-plugins/{plugin}/config/validate", config)
    assert status == 200, body
    return _errors(body)


def _create_refused(worker: WorkerProcess, name: str, config: dict[str, str]) -> str:
    config = {**config, "name": name}
    status, body = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert status == 400, body
    status, put_body = worker.call("PUT", f"/connectors/{name}/config", config)
    assert status == 400, put_body
    assert put_body["message"] == body["message"]
    return str(body["message"])


def test_preflight_validation_cases(cluster) -> None:
    _, eos, alos = cluster
    fib = {"connector.class": PREFIX + "FibonacciConnector", "name": "p", "topic": "p"}
    required = {"exactly.once.support": "required"}
    # Supported connector, required, EOS worker: valid; on a disabled worker: one error.
    assert _validate(eos, {**fib, **required}) == {}
    assert _validate(alos, {**fib, **required}) == {"exactly.once.support": [NOT_ENABLED]}
    # None and UNSUPPORTED answers, each on exactly.once.support.
    silent = {**fib, "connector.class": PREFIX + "SilentConnector"}
    assert _validate(eos, {**silent, **required}) == {"exactly.once.support": [UNKNOWN_SUPPORT]}
    unsupported = {**fib, "connector.class": PREFIX + "UnsupportedConnector"}
    assert _validate(eos, {**unsupported, **required}) == {"exactly.once.support": [UNSUPPORTED]}
    assert _validate(alos, {**unsupported, **required}) == {
        "exactly.once.support": [NOT_ENABLED, UNSUPPORTED]
    }
    # "requested" never checks.
    assert _validate(eos, {**unsupported, "exactly.once.support": "requested"}) == {}
    assert _validate(alos, {**silent, "exactly.once.support": "REQUESTED"}) == {}
    # Connector-defined boundaries: UNSUPPORTED (the default) and None, on transaction.boundary.
    connector_boundary = {"transaction.boundary": "connector"}
    assert _validate(eos, {**unsupported, **connector_boundary}) == {
        "transaction.boundary": [NO_BOUNDARIES]
    }
    assert _validate(eos, {**silent, **connector_boundary}) == {
        "transaction.boundary": [NULL_BOUNDARIES]
    }
    assert _validate(eos, {**fib, **connector_boundary}) == {}
    verifiable = {
        "connector.class": "VerifiableSource",
        "topic": "v",
        "name": "v",
        "throughput": "5",
    }
    assert _validate(eos, {**verifiable, **connector_boundary}) == {
        "transaction.boundary": [NO_BOUNDARIES]
    }
    # Exceptions from the connector become "unexpected error" messages.
    failing = {**fib, "connector.class": PREFIX + "FailingConnector"}
    assert _validate(eos, {**failing, **required, **connector_boundary}) == {
        "exactly.once.support": ["An unexpected error occurred during validation: cannot tell"],
        "transaction.boundary": [
            "An unexpected error occurred during validation: cannot tell either"
        ],
    }
    # Invalid values are reported by the key's validator, and nothing else is asked.
    assert _validate(eos, {**fib, "exactly.once.support": "always"}) == {
        "exactly.once.support": [
            "Invalid value always for configuration exactly.once.support: String must be one "
            "of (case insensitive): requested, required"
        ]
    }
    assert _validate(eos, {**fib, "transaction.boundary": "never"}) == {
        "transaction.boundary": [
            "Invalid value never for configuration transaction.boundary: String must be one "
            "of (case insensitive): poll, interval, connector"
        ]
    }
    assert _validate(eos, {**fib, "transaction.boundary.interval.ms": "-1"}) == {
        "transaction.boundary.interval.ms": [
            "Invalid value -1 for configuration transaction.boundary.interval.ms: "
            "Value must be at least 0"
        ]
    }
    # POST /connectors and PUT /connectors/{c}/config refuse the same cases with 400.
    message = _create_refused(alos, "p1", {**fib, **required})
    assert f"exactly.once.support: {NOT_ENABLED}" in message
    message = _create_refused(eos, "p2", {**silent, **required})
    assert f"exactly.once.support: {UNKNOWN_SUPPORT}" in message
    message = _create_refused(eos, "p3", {**unsupported, **required})
    assert f"exactly.once.support: {UNSUPPORTED}" in message
    message = _create_refused(eos, "p4", {**verifiable, **connector_boundary})
    assert f"transaction.boundary: {NO_BOUNDARIES}" in message
    assert eos.get("/connectors") == []
    # The built-in connectors' answers.
    assert _validate(eos, {**verifiable, **required}) == {}
    file_source = {"connector.class": "FileStreamSource", "topic": "f", "name": "f"}
    assert _validate(eos, {**file_source, **required}) == {"exactly.once.support": [UNSUPPORTED]}
    assert _validate(eos, {**file_source, "file": "/tmp/x", **required}) == {}


def _create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    status, body = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body


def _task_state(worker: WorkerProcess, name: str) -> tuple[str, str]:
    tasks = worker.get(f"/connectors/{name}/status")["tasks"]
    if not tasks:
        return "NONE", ""
    return tasks[0]["state"], tasks[0].get("trace", "")


def _metrics(worker: WorkerProcess, name: str) -> dict[str, Any]:
    return dict(worker.get(f"/connectors/{name}/tasks/0/metrics")["metrics"])


def _visible(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[dict[str, Any]]:
    return [json.loads(m.value()) for m in read_to_end(bootstrap, topic, isolation)]


def _offset_boundaries(bootstrap: str, group: str, connector: str) -> set[int]:
    """seqno+1 of every committed offset record of ``connector``: the ends of its
    committed transactions (read_committed)."""
    topic = f"{group}-offsets"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"offsets-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        ends, remaining = set(), set(metadata.partitions)
        # A connector still writing would keep the partitions from their end: fail, not hang.
        deadline = time.monotonic() + 60
        while remaining:
            assert time.monotonic() < deadline, f"{topic} not read to its end in 60 s"
            msg = consumer.poll(10)
            assert msg is not None
            if msg.error() is not None:
                remaining.discard(msg.partition())
                continue
            name, _ = json.loads(msg.key())
            if name == connector and msg.value() is not None:
                ends.add(int(json.loads(msg.value())["seqno"]) + 1)
        return ends
    finally:
        consumer.close()


def _topic(broker: EmbeddedBroker, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def _seqnos_whole(samples: list[list[dict[str, Any]]], ends: set[int]) -> None:
    for sample in samples:
        seqnos = [r["seqno"] for r in sample]
        assert seqnos == list(range(len(seqnos))), "gap or duplicate"
        assert len(seqnos) == 0 or len(seqnos) in ends, (len(seqnos), sorted(ends)[:20])


def _sampled_run(
    broker: EmbeddedBroker, eos: WorkerProcess, name: str, config: dict[str, str], samples: int
) -> tuple[list[list[dict[str, Any]]], set[int], dict[str, Any]]:
    """Run connector ``name``, take read_committed snapshots of its topic while it runs,
    then stop it: (snapshots with the final one last, transaction ends, task metrics)."""
    _create(eos, name, config)
    try:
        wait_for(lambda: _task_state(eos, name)[0] == "RUNNING", 60, "task running")
        snapshots = []
        for _ in range(samples):
            time.sleep(0.6)
            snapshots.append(_visible(broker.bootstrap, config["topic"]))
        metrics = _metrics(eos, name)
        assert eos.call("PUT", f"/connectors/{name}/stop")[0] == 204
        wait_for(lambda: _task_state(eos, name)[0] in ("NONE", "UNASSIGNED"), 30, "tasks stopped")
        snapshots.append(_visible(broker.bootstrap, config["topic"]))
        ends = _offset_boundaries(broker.bootstrap, EOS_GROUP, name)
        _seqnos_whole(snapshots, ends)
        assert len(snapshots[-1]) == max(ends)
    finally:
        # Even after a failure: a connector left running would disturb the next tests.
        deleted = eos.call("DELETE", f"/connectors/{name}")[0]
    assert deleted == 204
    return snapshots, ends, metrics


def test_poll_boundary_one_transaction_per_batch(cluster) -> None:
    broker, eos, _ = cluster
    config = {
        "connector.class": "VerifiableSource",
        "topic": _topic(broker, "poll-out"),
        "throughput": "2000",
        "batch.size": "37",
        "tasks.max": "1",
        "exactly.once.support": "required",
    }
    snapshots, ends, metrics = _sampled_run(broker, eos, "poll", config, 5)
    assert len(snapshots[-1]) > 37 * 5
    # Throttled polls may return fewer than 37, never more; every transaction is one poll.
    assert all((b - a) <= 37 for a, b in zip(sorted({0, *ends}), sorted(ends), strict=False))
    # Under load the throttle may cut every poll sampled so far below 37.
    assert 1 <= metrics["transaction-size-max"] <= 37


def test_interval_boundary_and_metrics(cluster) -> None:
    broker, eos, _ = cluster
    config = {
        "connector.class": "VerifiableSource",
        "topic": _topic(broker, "interval-out"),
        "throughput": "400",
        "batch.size": "10",
        "tasks.max": "1",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "1000",
    }
    _, _, metrics = _sampled_run(broker, eos, "interval", config, 6)
    assert metrics["transactions-committed"] >= 2
    # About 400 records a second, committed once a second: far more than one poll batch.
    assert metrics["transaction-size-min"] > 10
    assert metrics["transaction-size-max"] >= metrics["transaction-size-avg"] > 100


@pytest.mark.parametrize("boundary", ["poll", "interval", "connector"])
def test_a_pause_longer_than_the_transaction_timeout_keeps_the_task_running(
    cluster, boundary: str
) -> None:
    """Under every transaction boundary (interval: 1 s), with a 4 s transaction timeout,
    paused for 10 s: nothing is left open while paused (Kafka's onPause commits the open
    transaction), so read_committed readers see everything sent so far, and the task is
    RUNNING after the resume (not fenced by the coordinator's abort of a timed-out
    transaction). Nothing is lost or duplicated."""
    broker, eos, _ = cluster
    name = f"pausing-{boundary}"  # a deleted connector's offsets stay
    topic = _topic(broker, f"pause-out-{boundary}")
    config = {
        "connector.class": "VerifiableSource",
        "topic": topic,
        "throughput": "200",
        "tasks.max": "1",
        "transaction.boundary": boundary,
        "transaction.boundary.interval.ms": "1000",
        "producer.override.transaction.timeout.ms": "4000",
    }
    if boundary == "connector":
        # VerifiableSource's task asking for a commit after each poll batch.
        config["connector.class"] = PREFIX + "BatchCommitSourceConnector"
    if boundary != "interval":
        del config["transaction.boundary.interval.ms"]
    _create(eos, name, config)
    wait_for(lambda: len(_visible(broker.bootstrap, topic)) > 100, 60, "records flowing")
    assert eos.call("PUT", f"/connectors/{name}/pause") == (202, None)
    wait_for(lambda: _task_state(eos, name)[0] == "PAUSED", 30, "paused")
    time.sleep(1)
    # Nothing hangs while paused: read_committed sees what read_uncommitted sees.
    committed = _visible(broker.bootstrap, topic)
    assert len(committed) == len(_visible(broker.bootstrap, topic, "read_uncommitted"))
    time.sleep(10)  # past the transaction timeout
    assert eos.call("PUT", f"/connectors/{name}/resume") == (202, None)
    wait_for(lambda: len(_visible(broker.bootstrap, topic)) > len(committed) + 100, 60, "resumed")
    # RUNNING once the resume's status is written (not FAILED: fenced by the abort).
    wait_for(lambda: _task_state(eos, name)[0] == "RUNNING", 30, "RUNNING after the resume")
    assert eos.call("PUT", f"/connectors/{name}/stop")[0] == 204
    wait_for(lambda: _task_state(eos, name)[0] == "NONE", 30, "stopped")
    seqnos = [r["seqno"] for r in _visible(broker.bootstrap, topic)]
    assert seqnos == list(range(len(seqnos))), "gap or duplicate"
    assert eos.call("DELETE", f"/connectors/{name}")[0] == 204


def test_connector_boundary_fibonacci_aborts_even_sizes(cluster) -> None:
    broker, eos, _ = cluster
    topic = _topic(broker, "fib-out")
    config = {
        "connector.class": PREFIX + "FibonacciConnector",
        "topic": topic,
        "transactions": "12",
        "exactly.once.support": "required",
        "transaction.boundary": "connector",
    }
    _create(eos, "fib", config)
    sizes = fibonacci(12)
    committed_sizes = [s for s in sizes if s % 2]
    aborted = len(sizes) - len(committed_sizes)
    # Each abort is followed by a commit of the aborted records' offsets, a transaction
    # of 0 records in the metrics (Kafka's connector boundary manager).
    done = (len(committed_sizes) + aborted, aborted)
    assert done == (12, 4)
    wait_for(
        lambda: (
            (
                (m := _metrics(eos, "fib")).get("transactions-committed"),
                m.get("transactions-aborted"),
            )
            == done
        ),
        60,
        "all transactions done",
    )
    metrics = _metrics(eos, "fib")
    assert metrics["transaction-size-min"] == 0
    assert metrics["transaction-size-max"] == 89
    assert metrics["transaction-size-avg"] == sum(committed_sizes) / done[0]
    # The same figures on the worker's Prometheus endpoint.
    from ..metrics_scrape import scrape, value

    samples = scrape(eos.url)
    fib = {"connector": "fib", "task": "0"}
    assert value(samples, "oncelog_connect_source_transaction_size_min", **fib) == 0
    assert value(samples, "oncelog_connect_source_transaction_size_max", **fib) == 89
    assert value(samples, "oncelog_connect_source_transaction_size_avg", **fib) == (
        sum(committed_sizes) / done[0]
    )
    assert value(samples, "oncelog_connect_source_transactions_committed_total", **fib) == 12
    assert value(samples, "oncelog_connect_source_transactions_aborted_total", **fib) == 4
    visible = _visible(broker.bootstrap, topic)
    assert all(r["size"] % 2 == 1 for r in visible), "an aborted record is visible"
    expected = [(txn, size) for txn, size in enumerate(sizes) if size % 2 for _ in range(size)]
    assert [(r["txn"], r["size"]) for r in visible] == expected
    # The aborted records did reach the log: a read_uncommitted consumer sees all of them.
    everything = _visible(broker.bootstrap, topic, "read_uncommitted")
    assert [r["seqno"] for r in everything] == list(range(sum(sizes)))
    # The offsets of aborted records are committed after the abort, so they are not
    # polled again after a restart: the last offset ends the last (aborted) transaction.
    assert sizes[-1] % 2 == 0
    assert max(_offset_boundaries(broker.bootstrap, EOS_GROUP, "fib")) == sum(sizes)
    # Restarted, the task polls nothing more: the last aborted transaction's records
    # are not sent again.
    assert eos.call("POST", "/connectors/fib/tasks/0/restart")[0] == 204
    wait_for(lambda: _task_state(eos, "fib")[0] == "RUNNING", 30, "restarted")
    time.sleep(3)
    assert len(_visible(broker.bootstrap, topic, "read_uncommitted")) == sum(sizes)
    assert eos.call("DELETE", "/connectors/fib")[0] == 204


def test_writing_to_own_offsets_topic_fails_clearly(cluster) -> None:
    broker, eos, _ = cluster
    config = {
        "connector.class": "VerifiableSource",
        "topic": f"{EOS_GROUP}-offsets",
        "throughput": "10",
        "tasks.max": "1",
    }
    _create(eos, "loop", config)
    state, trace = wait_for(
        lambda: (s := _task_state(eos, "loop"))[0] == "FAILED" and s, 60, "task failed"
    )
    assert "which is the offsets topic this connector uses" in trace
    assert eos.call("DELETE", "/connectors/loop")[0] == 204


def test_timed_out_transaction_fails_the_task_with_remedies(tmp_path: Path) -> None:
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        topic = _topic(broker, "slow-out")
        worker = WorkerProcess(
            worker_settings(broker.bootstrap, "slow", **{"exactly.once.source.support": "enabled"}),
            tmp_path / "worker.log",
        ).start()
        try:
            config = {
                "connector.class": "VerifiableSource",
                "topic": topic,
                "throughput": "20",
                "tasks.max": "1",
                "transaction.boundary": "interval",
                "transaction.boundary.interval.ms": "8000",
                "producer.override.transaction.timeout.ms": "1000",
            }
            _create(worker, "slow", config)
            _, trace = wait_for(
                lambda: (s := _task_state(worker, "slow"))[0] == "FAILED" and s,
                60,
                "task failed",
            )
            assert "producer transaction" in trace
            assert "producer.override.transaction.timeout.ms" in trace
            assert "set transaction.boundary to poll" in trace
            assert _visible(broker.bootstrap, topic) == []  # nothing was committed
        finally:
            worker.kill()


def test_a_task_failing_mid_batch_commits_nothing_of_it(cluster) -> None:
    """KIP-618 (Kafka's ``finalOffsetCommit``): a task that fails in the middle of a
    poll batch commits nothing of it, neither records nor offsets; restarted, it
    delivers the whole batch exactly once."""
    broker, eos, _ = cluster
    topic = _topic(broker, "mid-out")
    config = {
        "connector.class": PREFIX + "MidBatchConnector",
        "topic": topic,
        "batch": "5",
        "fail.at": "52",  # the third record of the batch 50..54
        "exactly.once.support": "required",
    }
    _create(eos, "mid", config)

    def failed_trace() -> str | None:
        tasks = eos.get("/connectors/mid/status")["tasks"]
        return tasks[0]["trace"] if tasks and tasks[0]["state"] == "FAILED" else None

    trace = wait_for(failed_trace, 60, "the task failed")
    assert "Couldn't convert" in trace, trace
    # Batches 0..49 committed; nothing of 50..54, not even 50 and 51 which were sent.
    assert [r["seqno"] for r in _visible(broker.bootstrap, topic)] == list(range(50))
    sent = [r["seqno"] for r in _visible(broker.bootstrap, topic, "read_uncommitted")]
    assert sent[:50] == list(range(50)) and set(sent[50:]) <= {50, 51}
    offsets = eos.get("/connectors/mid/offsets")["offsets"]
    assert offsets == [{"partition": {"mid": 0}, "offset": {"seqno": 49}}]

    # Restarted without the bad record: the whole batch, exactly once.
    config["fail.at"] = "-1"
    assert eos.call("PUT", "/connectors/mid/config", config)[0] == 200
    wait_for(lambda: len(_visible(broker.bootstrap, topic)) >= 100, 60, "records after the restart")
    assert eos.call("DELETE", "/connectors/mid")[0] == 204
    seqnos = [r["seqno"] for r in _visible(broker.bootstrap, topic)]
    assert seqnos == list(range(len(seqnos))), "gap or duplicate"
