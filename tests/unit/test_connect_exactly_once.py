"""Pure logic of exactly-once source support (KIP-618): the merged offsets view, which
offsets topic a connector uses, the forced client settings, transaction requests,
transaction-size statistics, preflight validation, and the exactly-once task loop's
boundaries over an in-memory transactional sender."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from oncelog.connect.api import SourceRecord, SourceTask
from oncelog.connect.api.converters import JsonConverter
from oncelog.connect.api.errors import (
    ConnectException,
    IllegalWorkerStateException,
    ProducerFencedError,
)
from oncelog.connect.api.records import RecordMetadata
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.client_configs import (
    exactly_once_producer_config,
    offsets_consumer_config,
)
from oncelog.connect.runtime.connector_validation import validate_connector_config
from oncelog.connect.runtime.exactly_once_source_task import (
    REMEDIES,
    ExactlyOnceWorkerSourceTask,
    TransactionSizes,
)
from oncelog.connect.runtime.offsets_topics import OffsetsTopic, offsets_topic
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.task_context import WorkerTransactionContext
from oncelog.connect.runtime.transformation_chain import TransformationChain
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.offset_records import decode
from oncelog.connect.storage.offsets import LayeredOffsetStore, MemoryOffsetStore

BASE = {
    "bootstrap.servers": "a:9092,b:9092",
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "JsonConverter",
    "value.converter": "JsonConverter",
}


def _worker(**extra: str) -> WorkerConfig:
    return WorkerConfig({**BASE, **extra})


def test_layered_offsets_follow_the_seed_example() -> None:
    global_store = MemoryOffsetStore()
    global_store.commit(
        {
            (("subreddit", "apachekafka"),): {"timestamp": "4761"},
            (("subreddit", "CatsStandingUp"),): {"timestamp": "2112"},
        }
    )
    layered = LayeredOffsetStore(global_store)
    layered.commit(
        {
            (("subreddit", "CatsStandingUp"),): {"timestamp": "2169"},
            (("subreddit", "grilledcheese"),): {"timestamp": "489"},
        }
    )
    names = ["apachekafka", "CatsStandingUp", "grilledcheese", "none"]
    seen = layered.offsets([{"subreddit": n} for n in names])
    assert seen == {
        (("subreddit", "apachekafka"),): {"timestamp": "4761"},
        (("subreddit", "CatsStandingUp"),): {"timestamp": "2169"},
        (("subreddit", "grilledcheese"),): {"timestamp": "489"},
    }
    # Commits go to the connector's layer only.
    assert global_store.offset({"subreddit": "grilledcheese"}) is None
    # A tombstone in the connector's own topic (a reset) hides the global offset, even
    # when a late copy reaches the global topic afterwards.
    layered.commit({(("subreddit", "apachekafka"),): None})
    global_store.commit({(("subreddit", "apachekafka"),): {"timestamp": "4762"}})
    assert layered.offset({"subreddit": "apachekafka"}) is None
    assert (("subreddit", "apachekafka"),) not in layered.merged()
    layered.commit({(("subreddit", "apachekafka"),): {"timestamp": "1"}})
    assert layered.offset({"subreddit": "apachekafka"}) == {"timestamp": "1"}


def test_offsets_topic_explicit_implicit_and_global() -> None:
    enabled = _worker(**{"exactly.once.source.support": "enabled"})
    disabled = _worker()
    other = {"producer.override.bootstrap.servers": "x:9092"}
    same = {"producer.override.bootstrap.servers": "b:9092, a:9092"}
    assert offsets_topic(disabled, {}) == OffsetsTopic("o", False)
    assert offsets_topic(disabled, {"offsets.storage.topic": "mine"}) == OffsetsTopic("mine", True)
    assert offsets_topic(disabled, {"offsets.storage.topic": " "}) == OffsetsTopic("o", False)
    assert offsets_topic(enabled, {"offsets.storage.topic": "o"}) == OffsetsTopic("o", False)
    # Implicit: exactly-once on, producer on another cluster, no explicit topic.
    assert offsets_topic(enabled, other) == OffsetsTopic("o", True)
    assert offsets_topic(enabled, same) == OffsetsTopic("o", False)
    assert offsets_topic(disabled, other) == OffsetsTopic("o", False)
    assert offsets_topic(enabled, {**other, "offsets.storage.topic": "o"}) == OffsetsTopic(
        "o", True
    )
    # A worker-level producer.bootstrap.servers is another cluster as well (Kafka's
    # Worker.sameOffsetTopicAsWorker looks at the effective producer config); the
    # connector's override wins over it.
    elsewhere = _worker(
        **{"exactly.once.source.support": "enabled", "producer.bootstrap.servers": "x:9092"}
    )
    assert offsets_topic(elsewhere, {}) == OffsetsTopic("o", True)
    assert offsets_topic(elsewhere, same) == OffsetsTopic("o", False)
    assert offsets_consumer_config(elsewhere, "c", {})["bootstrap.servers"] == "x:9092"
    assert offsets_consumer_config(enabled, "c", {})["bootstrap.servers"] == "a:9092,b:9092"


def test_producer_and_consumer_settings_are_forced(caplog: pytest.LogCaptureFixture) -> None:
    worker = _worker(
        **{"producer.transactional.id": "mine", "consumer.isolation.level": "read_uncommitted"}
    )
    with caplog.at_level(logging.WARNING):
        config = exactly_once_producer_config(
            worker,
            "conn",
            3,
            {"producer.override.enable.idempotence": "false", "producer.override.linger.ms": "7"},
        )
        consumer = offsets_consumer_config(worker, "conn", {})
    assert config["transactional.id"] == "g-conn-3"
    assert config["enable.idempotence"] == "true"
    assert config["linger.ms"] == "7"
    assert config["partitioner"] == "murmur2_random"
    assert config["delivery.timeout.ms"] == "60000"
    assert consumer["isolation.level"] == "read_committed"
    warnings = [r.getMessage() for r in caplog.records]
    assert any("'mine' for transactional.id" in w for w in warnings)
    assert any("'false' for enable.idempotence" in w for w in warnings)
    assert any("'read_uncommitted' for isolation.level" in w for w in warnings)
    timeout = exactly_once_producer_config(
        _worker(), "c", 0, {"producer.override.transaction.timeout.ms": "9000"}
    )
    assert timeout["delivery.timeout.ms"] == "9000"


def test_transaction_context_requests() -> None:
    context = WorkerTransactionContext()
    a = SourceRecord.create({"p": 1}, {"o": 1}, "t", 1)
    b = SourceRecord.create({"p": 1}, {"o": 2}, "t", 2)
    context.commit_transaction(a)
    context.abort_transaction()
    assert context.take_record_request(b) is None
    assert context.take_record_request(a) == "commit"
    assert context.take_record_request(a) is None
    assert context.take_batch_request() == "abort"
    assert context.take_batch_request() is None
    # A conflict fails the task where the loop asks (Kafka), not in the connector's own
    # call, where the connector could swallow the error.
    context.commit_transaction()
    context.abort_transaction()
    with pytest.raises(IllegalWorkerStateException, match="both commit and abort"):
        context.take_batch_request()
    # Records are matched by equality, as Kafka's sets of records do.
    context.commit_transaction(SourceRecord.create({"p": 1}, {"o": 1}, "t", 1))
    assert context.take_record_request(a) == "commit"
    context.commit_transaction(a)
    context.abort_transaction(a)
    with pytest.raises(IllegalWorkerStateException, match="same record against topic/partition t/"):
        context.take_record_request(a)


def test_transaction_sizes() -> None:
    sizes = TransactionSizes()
    assert sizes.as_dict()["transaction-size-avg"] is None
    for n in (5, 1, 9):
        sizes.record(n)
    assert sizes.as_dict() == {
        "transaction-size-min": 1,
        "transaction-size-max": 9,
        "transaction-size-avg": 5.0,
        "transactions-committed": 3,
    }


# -- preflight ---------------------------------------------------------------------------


def _errors(config: dict[str, str], eos: str) -> dict[str, list[str]]:
    result = validate_connector_config(config, PluginRegistry.with_builtins(), "All", eos)
    return {
        c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]
    }


def test_preflight_on_builtin_connectors() -> None:
    verifiable = {
        "connector.class": "VerifiableSource",
        "name": "v",
        "topic": "t",
        "throughput": "1",
    }
    required = {"exactly.once.support": "required"}
    assert _errors({**verifiable, **required}, "enabled") == {}
    assert _errors({**verifiable, **required}, "preparing") == {
        "exactly.once.support": ["This worker does not have exactly-once source support enabled."]
    }
    pg = {
        "connector.class": "PostgresSource",
        "name": "pg",
        "connection.url": "postgresql://x/y",
        "table.include.list": "t",
        "topic.prefix": "p-",
        "timestamp.column.name": "at",
        **required,
    }
    assert _errors({**pg, "mode": "timestamp"}, "enabled") == {
        "exactly.once.support": [
            "The connector does not support exactly-once semantics with the provided configuration."
        ]
    }
    assert (
        _errors(
            {**pg, "mode": "timestamp+incrementing", "incrementing.column.name": "id"}, "enabled"
        )
        == {}
    )
    # Kafka's SourceConnectorConfig: offsets.storage.topic is a NonEmptyString.
    assert _errors({**verifiable, "offsets.storage.topic": ""}, "enabled") == {
        "offsets.storage.topic": [
            "Invalid value  for configuration offsets.storage.topic: String must be non-empty"
        ]
    }
    # Sink connectors have none of these keys.
    sink = {"connector.class": "VerifiableSink", "name": "s", "topics": "t", **required}
    result = validate_connector_config(sink, PluginRegistry.with_builtins(), "All", "enabled")
    assert "exactly.once.support" not in {c["definition"]["name"] for c in result["configs"]}


# -- the task loop -----------------------------------------------------------------------


class MemorySender:
    """An in-memory transactional sender: records what the loop asks of it."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.pending: list[tuple[Callable[..., None], int]] = []
        self.fail_commit: str | None = None
        self.fail_commit_with: Exception | None = None
        self.offset = 0

    def send(self, topic: str, key: bytes | None, value: bytes | None, *, partition: int | None,
             timestamp: int | None, headers: Sequence[tuple[str, bytes | None]], on_delivery: Any) -> None:  # fmt: skip
        self.log.append(("send", topic, value))
        self.pending.append((on_delivery, self.offset))
        self.offset += 1

    def poll(self, timeout_s: float) -> None:
        pass

    def flush(self, timeout_s: float) -> int:
        for callback, offset in self.pending:
            callback(None, RecordMetadata("t", 0, offset, None))
        self.pending = []
        return 0

    def init_transactions(self, timeout_s: float) -> None:
        self.log.append("init")

    def begin_transaction(self) -> None:
        self.log.append("begin")

    def write(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            offset = decode(key, value)
            self.log.append(("offset", topic, offset.partition["p"], offset.offset))

    def commit_transaction(self, timeout_s: float) -> None:
        if self.fail_commit_with is not None:
            raise self.fail_commit_with
        if self.fail_commit:
            raise ConnectException(self.fail_commit)
        self.log.append("commit")

    def abort_transaction(self, timeout_s: float) -> None:
        self.pending = []
        self.log.append("abort")

    def close(self) -> None:
        self.log.append("close")


class ScriptedTask(SourceTask):
    def __init__(self, batches: list[list[SourceRecord]], on_batch: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self.batches = batches
        self.on_batch = on_batch
        self.events: list[Any] = []
        self.polls = 0

    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        self.events.append("start")

    def poll(self) -> list[SourceRecord] | None:
        if not self.batches:
            return None
        if self.on_batch is not None:
            self.on_batch(self.polls)
        self.polls += 1
        return self.batches.pop(0)

    def stop(self) -> None:
        pass

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.events.append(("record", record.source_offset["o"] if record.source_offset else None))

    def commit(self) -> None:
        self.events.append("commit")


def _record(o: int, topic: str = "out") -> SourceRecord:
    return SourceRecord.create({"p": 0}, {"o": o}, topic, o)


def _loop(task: ScriptedTask, sender: MemorySender, boundary: str, clock: Callable[[], float] = lambda: 0.0,
          **kw: Any) -> ExactlyOnceWorkerSourceTask:  # fmt: skip
    converter = JsonConverter()
    converter.configure({"schemas.enable": "false"}, False)
    return ExactlyOnceWorkerSourceTask(
        ConnectorTaskId("c", 0), task, {}, key_converter=converter, value_converter=converter,
        chain=TransformationChain([]), sender=sender, offsets=MemoryOffsetStore(),
        offsets_topic="offsets", boundary=boundary, boundary_interval_ms=1000, clock=clock, **kw,
    )  # fmt: skip


def test_poll_boundary_commits_each_batch_with_its_offsets() -> None:
    sender = MemorySender()
    hooked: list[str] = []
    task = ScriptedTask([[_record(1), _record(2)], [], [_record(3)]])
    loop = _loop(task, sender, "poll", before_first_poll=lambda: hooked.append(str(sender.log)))
    loop.start()
    assert hooked == ["[]", "['init']"]  # before and after init_transactions, before start
    for _ in range(3):
        loop.iterate()
    loop.close()
    assert sender.log == [
        "init", "begin", ("send", "out", b"1"), ("send", "out", b"2"), ("offset", "offsets", 0, {"o": 2}),
        "commit", "begin", ("send", "out", b"3"), ("offset", "offsets", 0, {"o": 3}), "commit", "close",
    ]  # fmt: skip
    # commit_record and commit come after each commit, never before.
    assert task.events == ["start", ("record", 1), ("record", 2), "commit", ("record", 3), "commit"]
    assert loop.transactions.as_dict()["transaction-size-avg"] == 1.5
    assert loop.offsets.offset({"p": 0}) == {"o": 3}


def test_interval_boundary_commits_when_due_and_at_close() -> None:
    now = [0.0]
    sender = MemorySender()
    task = ScriptedTask([[_record(1)], [_record(2)], [_record(3)]])
    loop = _loop(task, sender, "interval", clock=lambda: now[0])
    loop.start()
    loop.iterate()
    loop.iterate()
    assert "commit" not in sender.log
    now[0] = 1.0
    loop.iterate()
    assert sender.log.count("commit") == 1
    assert loop.transactions.max == 3
    loop.close()
    assert sender.log.count("commit") == 1  # nothing left to commit


def test_connector_boundary_commits_and_aborts_on_request() -> None:
    sender = MemorySender()
    records = [_record(i) for i in range(1, 6)]

    def on_batch(poll: int) -> None:
        context = task.context.transaction_context()
        assert context is not None
        if poll == 0:
            context.commit_transaction(records[1])  # after the 2nd record of the batch
        else:
            context.abort_transaction()  # the whole next batch

    task = ScriptedTask([records[:3], records[3:]], on_batch)
    loop = _loop(task, sender, "connector")
    loop.start()
    loop.iterate()
    loop.iterate()
    # An abort, then the aborted records' offsets in a new transaction (Kafka's
    # connector boundary manager): record 3 was in the aborted transaction with 4 and 5,
    # none is visible, and none is polled again after a restart.
    assert [e for e in sender.log if e in ("commit", "abort")] == ["commit", "abort", "commit"]
    assert sender.log[-3:] == ["begin", ("offset", "offsets", 0, {"o": 5}), "commit"]
    assert loop.offsets.offset({"p": 0}) == {"o": 5}
    assert task.events == [
        "start", ("record", 1), ("record", 2), "commit",
        ("record", 3), ("record", 4), ("record", 5), "commit",
    ]  # fmt: skip
    assert loop.aborted_transactions == 1
    # The abort counts as a transaction of 0 records (Kafka's metrics).
    assert (loop.transactions.count, loop.transactions.min) == (2, 0)
    task.batches = [[_record(6)]]
    task.on_batch = None  # no request for this batch
    loop.iterate()
    loop.close()  # the open transaction is aborted: only the task knows where it may end
    assert sender.log[-2:] == ["abort", "close"]
    assert loop.offsets.offset({"p": 0}) == {"o": 5}


def test_a_task_failing_mid_batch_commits_nothing_of_it() -> None:
    """Kafka never commits on the failure path: of [1, unconvertible, 3] nothing is
    committed, no offset, no commit_record; the open transaction is aborted."""
    sender = MemorySender()
    bad = SourceRecord.create({"p": 0}, {"o": 2}, "out", object())  # JSON cannot encode it
    task = ScriptedTask([[_record(1), bad, _record(3)]])
    loop = _loop(task, sender, "poll")
    loop.start()
    with pytest.raises(ConnectException, match="Tolerance exceeded"):
        loop.iterate()
    assert loop.close(failed=True) is False
    assert sender.log == ["init", "begin", ("send", "out", b"1"), "abort", "close"]
    assert task.events == ["start"]
    assert loop.offsets.offset({"p": 0}) is None


def test_a_pause_commits_the_open_transaction_and_a_resume_restarts_the_interval() -> None:
    now = [0.0]
    sender = MemorySender()
    task = ScriptedTask([[_record(1)], [_record(2)]])
    loop = _loop(task, sender, "interval", clock=lambda: now[0])
    loop.start()
    loop.iterate()
    assert "commit" not in sender.log
    loop.on_pause()  # Kafka's onPause: nothing stays open while paused
    assert sender.log[-2:] == [("offset", "offsets", 0, {"o": 1}), "commit"]
    now[0] = 30.0
    loop.on_resume()
    loop.iterate()
    assert sender.log.count("commit") == 1  # a new interval started at the resume
    now[0] = 31.0
    loop.iterate()
    assert sender.log.count("commit") == 2


def test_dropped_records_are_committed_with_their_transaction() -> None:
    """commit_record for a record a transform dropped comes after its transaction
    commits, in order; after an abort it comes with the offsets' commit."""
    from oncelog.connect.runtime.transformation_chain import Stage
    from oncelog.connect.transforms.filter import Filter

    sender = MemorySender()
    task = ScriptedTask([[_record(1), _record(2)]])
    loop = _loop(task, sender, "poll")
    loop.chain = TransformationChain([Stage("drop", Filter())])
    loop.start()
    loop.iterate()
    assert task.events == ["start", ("record", 1), ("record", 2), "commit"]
    assert sender.log[-2:] == [("offset", "offsets", 0, {"o": 2}), "commit"]


def test_failed_commit_fails_the_task_with_remedies() -> None:
    sender = MemorySender()
    sender.fail_commit = "Committing the transaction failed: timed out"
    task = ScriptedTask([[_record(1)]])
    loop = _loop(task, sender, "poll")
    loop.start()
    with pytest.raises(ConnectException) as failure:
        loop.iterate()
    assert "timed out" in str(failure.value) and REMEDIES in str(failure.value)
    assert task.events == ["start"]  # no commit_record for an uncommitted transaction


def test_a_fenced_commit_fails_the_task_without_the_timeout_remedies() -> None:
    """Zombie fencing doing its job is no timeout: the trace says a newer instance took
    over, without the remedies for timed-out transactions."""
    sender = MemorySender()
    sender.fail_commit_with = ProducerFencedError("Committing the transaction failed: fenced")
    task = ScriptedTask([[_record(1)]])
    loop = _loop(task, sender, "poll")
    loop.start()
    with pytest.raises(ProducerFencedError) as failure:
        loop.iterate()
    assert "A newer instance of this task took over" in str(failure.value)
    assert REMEDIES not in str(failure.value)


def test_records_to_the_own_offsets_topic_fail_the_task() -> None:
    task = ScriptedTask([[_record(1, "offsets")]])
    loop = _loop(task, MemorySender(), "poll")
    loop.start()
    with pytest.raises(ConnectException, match="which is the offsets topic this connector uses"):
        loop.iterate()


def test_a_failing_start_hook_closes_the_producer_before_the_task_starts() -> None:
    sender = MemorySender()
    task = ScriptedTask([[_record(1)]])

    def newer_generation() -> None:
        raise ConnectException("a newer set of task configurations exists")

    loop = _loop(task, sender, "poll", before_first_poll=newer_generation)
    with pytest.raises(ConnectException, match="newer set"):
        loop.start()
    # The check runs before init_transactions too (Kafka's preProducerCheck): a
    # replaced instance never fences its successor.
    assert sender.log == ["close"]
    assert task.events == []


def test_the_start_check_runs_again_once_the_producer_is_initialized() -> None:
    sender = MemorySender()
    task = ScriptedTask([[_record(1)]])
    calls: list[list[Any]] = []

    def replaced_during_init() -> None:
        calls.append(list(sender.log))
        if len(calls) == 2:
            raise ConnectException("a newer set of task configurations exists")

    loop = _loop(task, sender, "poll", before_first_poll=replaced_during_init)
    with pytest.raises(ConnectException, match="newer set"):
        loop.start()
    assert calls == [[], ["init"]]
    assert sender.log == ["init", "close"]


def test_a_task_stopped_before_its_start_never_initializes_a_producer() -> None:
    sender = MemorySender()
    loop = _loop(ScriptedTask([]), sender, "poll")
    loop.stop()
    with pytest.raises(ConnectException, match="stopped before its producer started"):
        loop.start()
    assert sender.log == ["close"]


def test_separate_offsets_clients_target_the_producers_cluster() -> None:
    from oncelog.connect.runtime.client_configs import offsets_admin_config

    worker = _worker()
    away = {"producer.override.bootstrap.servers": "x:9092"}
    assert offsets_consumer_config(worker, "c", away)["bootstrap.servers"] == "x:9092"
    assert offsets_admin_config(worker, "c", away)["bootstrap.servers"] == "x:9092"
    assert offsets_admin_config(worker, "c", {})["bootstrap.servers"] == "a:9092,b:9092"


def test_a_worker_transactional_id_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """KIP-618: the leader's config-topic producer always uses connect-cluster-<group>."""
    with caplog.at_level(logging.WARNING, logger="oncelog.connect.runtime.worker_config"):
        config = _worker(**{"transactional.id": "mine"})
    assert "transactional.id" not in config.originals
    assert "is ignored" in caplog.text and "'mine'" in caplog.text
