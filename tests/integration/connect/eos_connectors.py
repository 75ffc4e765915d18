"""Source connectors for the exactly-once tests, loaded by worker processes through
their full Python path (``tests.integration.connect.eos_connectors.<Class>``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from oncelog.connect.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.connectors.verifiable import VerifiableSourceConnector, VerifiableSourceTask

PREFIX = "tests.integration.connect.eos_connectors."


def fibonacci(count: int) -> list[int]:
    sizes = [1, 1]
    while len(sizes) < count:
        sizes.append(sizes[-1] + sizes[-2])
    return sizes[:count]


class FibonacciTask(SourceTask):
    """Transaction i holds fibonacci(i) records; even-sized ones are aborted. Polls
    return at most 7 records, so transactions span poll batches."""

    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.sizes = fibonacci(int(config["transactions"]))
        offset = self.context.offset_storage_reader().offset({"fib": 0})
        self.seqno = 0 if offset is None else int(offset["seqno"]) + 1
        # Resume in the transaction the next seqno belongs to: a restart after the last
        # transaction (even an aborted one, whose offsets Kafka commits) polls nothing.
        self.txn, self.in_txn = 0, self.seqno
        while self.txn < len(self.sizes) and self.in_txn >= self.sizes[self.txn]:
            self.in_txn -= self.sizes[self.txn]
            self.txn += 1
        context = self.context.transaction_context()
        assert context is not None, "transaction.boundary=connector gives a context"
        self.transactions = context

    def poll(self) -> list[SourceRecord] | None:
        if self.txn >= len(self.sizes):
            return None
        batch = []
        while len(batch) < 7 and self.txn < len(self.sizes):
            size = self.sizes[self.txn]
            record = SourceRecord.create(
                {"fib": 0},
                {"seqno": self.seqno},
                self.topic,
                {"seqno": self.seqno, "txn": self.txn, "size": size},
            )
            batch.append(record)
            self.seqno += 1
            self.in_txn += 1
            if self.in_txn == size:
                if size % 2:
                    self.transactions.commit_transaction(record)
                else:
                    self.transactions.abort_transaction(record)
                self.txn, self.in_txn = self.txn + 1, 0
        return batch

    def stop(self) -> None:
        pass


class _Base(SourceConnector):
    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("topic", ConfigType.STRING, "eos", None, Importance.HIGH, "Target topic.")
            .define("transactions", ConfigType.INT, 12, None, Importance.LOW, "How many.")
        )

    def start(self, config: dict[str, str]) -> None:
        self.config = dict(config)

    def task_class(self) -> type[Task]:
        return FibonacciTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]

    def stop(self) -> None:
        pass


class FibonacciConnector(_Base):
    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class SilentConnector(_Base):
    """Answers None to both KIP-618 questions."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return None

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:  # type: ignore[override]
        return None  # type: ignore[return-value]


class UnsupportedConnector(_Base):
    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.UNSUPPORTED


class FailingConnector(_Base):
    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        raise RuntimeError("cannot tell")

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        raise RuntimeError("cannot tell either")


class BatchCommitSourceTask(VerifiableSourceTask):
    """VerifiableSource's task, committing a transaction after every poll batch itself
    (``transaction.boundary=connector``): the benchmark's connector-defined boundary."""

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll()
        context = self.context.transaction_context()
        if records and context is not None:
            context.commit_transaction()
        return records


class BatchCommitSourceConnector(VerifiableSourceConnector):
    def task_class(self) -> type[Task]:
        return BatchCommitSourceTask

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class StripedSourceTask(SourceTask):
    """Emits ``streams`` numbered streams striped over the tasks: task ``i`` of ``n`` owns
    the streams ``s`` with ``s % n == i``, so changing the task count moves streams between
    tasks, and a zombie of the old generation writes streams a new task owns now (what
    KIP-618's generational fencing is for). Each poll returns one record per owned stream;
    the offset of stream ``s`` is ``{"seqno": k}``."""

    def __init__(self) -> None:
        self.stopping = threading.Event()

    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.task = int(config["task"])
        self.pause_s = 1 / int(config["polls.per.second"])
        self.streams = [
            s for s in range(int(config["streams"])) if s % int(config["tasks"]) == self.task
        ]
        reader = self.context.offset_storage_reader()
        self.next = {}
        for stream in self.streams:
            offset = reader.offset({"stream": stream})
            self.next[stream] = 0 if offset is None else int(offset["seqno"]) + 1

    def poll(self) -> list[SourceRecord] | None:
        if self.stopping.wait(self.pause_s):
            return None
        batch = []
        for stream in self.streams:
            seqno = self.next[stream]
            batch.append(
                SourceRecord.create(
                    {"stream": stream},
                    {"seqno": seqno},
                    self.topic,
                    {"stream": stream, "seqno": seqno, "task": self.task},
                )
            )
            self.next[stream] = seqno + 1
        return batch

    def stop(self) -> None:
        self.stopping.set()


class StripedSourceConnector(SourceConnector):
    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("topic", ConfigType.STRING, "striped", None, Importance.HIGH, "Topic.")
            .define("streams", ConfigType.INT, 6, None, Importance.HIGH, "Stream count.")
            .define("polls.per.second", ConfigType.INT, 20, None, Importance.LOW, "Rate.")
        )

    def start(self, config: dict[str, str]) -> None:
        self.config = {"streams": "6", "polls.per.second": "20", **config}

    def task_class(self) -> type[Task]:
        return StripedSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.config, "task": str(i), "tasks": str(max_tasks)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED


class MidBatchTask(SourceTask):
    """Polls batches of ``batch`` records with seqnos from its offset; the record whose
    seqno is ``fail.at`` carries a value no converter can write (a set), so the task
    fails in the middle of that batch, after the records before it were sent."""

    def __init__(self) -> None:
        self.stopping = threading.Event()

    def version(self) -> str:
        return "1"

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.batch = int(config.get("batch", "5"))
        self.fail_at = int(config.get("fail.at", "-1"))
        offset = self.context.offset_storage_reader().offset({"mid": 0})
        self.seqno = 0 if offset is None else int(offset["seqno"]) + 1

    def poll(self) -> list[SourceRecord] | None:
        if self.stopping.wait(0.05):
            return None
        batch = []
        for _ in range(self.batch):
            value: object = {"seqno": self.seqno}
            if self.seqno == self.fail_at:
                value = {"seqno", "not JSON"}
            batch.append(SourceRecord.create({"mid": 0}, {"seqno": self.seqno}, self.topic, value))
            self.seqno += 1
        return batch

    def stop(self) -> None:
        self.stopping.set()


class MidBatchConnector(_Base):
    def task_class(self) -> type[Task]:
        return MidBatchTask

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED
