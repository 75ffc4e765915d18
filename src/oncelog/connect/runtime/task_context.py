"""Task contexts: the framework state a task can read or request.

These hold what a task asks for (offset resets, paused partitions, commit requests)
for the task loop to act on; the loop consumes the requests with the ``take_*``
methods. A worker and a direct test run use the same classes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from oncelog.connect.api.connector import (
    Config,
    ErrantRecordReporter,
    OffsetStorageReader,
    SinkTaskContext,
    SourceRecord,
    SourceTaskContext,
    TopicPartition,
    TransactionContext,
)
from oncelog.connect.api.errors import IllegalWorkerStateException


class BasicSourceTaskContext(SourceTaskContext):
    def __init__(
        self,
        config: Config,
        reader: OffsetStorageReader,
        transactions: TransactionContext | None = None,
    ) -> None:
        self._config = dict(config)
        self._reader = reader
        self._transactions = transactions

    def configs(self) -> Config:
        return dict(self._config)

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def transaction_context(self) -> TransactionContext | None:
        return self._transactions


class BasicSinkTaskContext(SinkTaskContext):
    def __init__(self, config: Config, reporter: ErrantRecordReporter | None = None) -> None:
        self._config = dict(config)
        self._reporter = reporter
        self._lock = threading.Lock()
        self._assignment: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._offset_resets: dict[TopicPartition, int] = {}
        self._commit_requested = False
        self.timeout_ms: int | None = None

    # -- what the task calls --
    def configs(self) -> Config:
        return dict(self._config)

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        with self._lock:
            self._offset_resets.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._assignment)

    def pause(self, *partitions: TopicPartition) -> None:
        with self._lock:
            self._check_assigned(partitions)
            self._paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        with self._lock:
            self._check_assigned(partitions)
            self._paused.difference_update(partitions)

    def request_commit(self) -> None:
        with self._lock:
            self._commit_requested = True

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._reporter

    def _check_assigned(self, partitions: tuple[TopicPartition, ...]) -> None:
        unknown = [str(p) for p in partitions if p not in self._assignment]
        if unknown:
            raise IllegalWorkerStateException(
                f"SinkTasks may not pause or resume partitions that are not assigned: {', '.join(unknown)}"
            )

    # -- what the task loop calls --
    def set_assignment(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self._assignment = set(partitions)
            self._paused &= self._assignment

    def paused(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._paused)

    def take_offset_resets(self) -> dict[TopicPartition, int]:
        with self._lock:
            resets, self._offset_resets = self._offset_resets, {}
            return resets

    def take_commit_request(self) -> bool:
        with self._lock:
            requested, self._commit_requested = self._commit_requested, False
            return requested


class WorkerTransactionContext(TransactionContext):
    """Transaction boundaries a source task requests (``transaction.boundary=connector``),
    as Kafka's ``WorkerTransactionContext``.

    A request names a record (commit or abort right after it, matched by equality) or
    the whole next poll batch. The task loop asks :meth:`take_record_request` after each
    record and :meth:`take_batch_request` after each batch; asking consumes the
    request. Conflicting requests (commit and abort of one record, or of one batch) are
    not refused inside the connector's own call, where it could swallow the error:
    the loop's question raises, and the task fails.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch: set[str] = set()
        self._records: list[tuple[SourceRecord, str]] = []

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("abort", record)

    def _request(self, what: str, record: SourceRecord | None) -> None:
        with self._lock:
            if record is None:
                self._batch.add(what)
            else:
                self._records.append((record, what))

    def take_record_request(self, record: SourceRecord) -> str | None:
        """ "commit", "abort" or None for ``record``."""
        with self._lock:
            found = {what for r, what in self._records if r == record}
            if not found:
                return None
            self._records = [(r, what) for r, what in self._records if r != record]
        return _one(
            found,
            f"the same record against topic/partition {record.topic}/{record.kafka_partition}",
        )

    def take_batch_request(self) -> str | None:
        with self._lock:
            found, self._batch = self._batch, set()
        return _one(found, "the same batch") if found else None


def _one(requests: set[str], scope: str) -> str:
    if len(requests) > 1:
        raise IllegalWorkerStateException(f"Connector requested both commit and abort of {scope}")
    return next(iter(requests))
