"""The loop that runs one sink task (at-least-once delivery).

The task's consumer is in group ``connect-<connector>``. Each iteration consumes a
batch, converts keys and values, applies the transformation chain and calls
``SinkTask.put``. Offsets are committed every ``offset.flush.interval.ms`` (or when
the task calls ``request_commit()``), and only what ``pre_commit`` returns, which
by default means after ``flush`` succeeded. Offsets are those of the *original*
record coordinates (KIP-793), as the next offset to consume.

A ``RetriableException`` from ``put`` redelivers the same batch after the task's
``timeout``, with the partitions paused meanwhile. Partition assignment changes call
``open`` / ``close`` (after a final commit of the revoked partitions).

With ``errors.tolerance=all`` records that fail conversion or a transform are skipped
and, when ``errors.deadletterqueue.topic.name`` is set, sent as they were consumed to
the dead-letter queue.

The consumer and the DLQ producer are reached through small interfaces the client
layer implements (:class:`SinkRecordSource`, :class:`DeadLetterSender`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from oncelog.connect.api.connector import SinkTask
from oncelog.connect.api.converters import Converter
from oncelog.connect.api.errors import ConnectException, RetriableException
from oncelog.connect.api.records import Headers, SinkRecord, TimestampType, TopicPartition
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.error_handling import NO_TOLERANCE, ErrorPolicy
from oncelog.connect.runtime.task_context import BasicSinkTaskContext
from oncelog.connect.runtime.transformation_chain import TransformationChain

log = logging.getLogger(__name__)

PartitionsCallback = Callable[[list[TopicPartition]], None]


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    headers: tuple[tuple[str, bytes | None], ...] = ()


class SinkRecordSource(Protocol):
    """The sink task's consumer."""

    def subscribe(
        self,
        topics: list[str],
        pattern: str | None,
        on_assign: PartitionsCallback,
        on_revoke: PartitionsCallback,
    ) -> None: ...

    def poll(self, timeout_s: float, max_records: int) -> list[ConsumedRecord]: ...

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Synchronous commit of next-offsets-to-consume."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def pause(self, partitions: list[TopicPartition]) -> None: ...

    def resume(self, partitions: list[TopicPartition]) -> None: ...

    def close(self) -> None: ...


class DeadLetterSender(Protocol):
    def send(self, record: ConsumedRecord, error: Exception) -> None: ...


@dataclass
class SinkTaskMetrics:
    consumed: int = 0
    put: int = 0
    filtered: int = 0
    skipped_errors: int = 0
    dead_lettered: int = 0
    retries: int = 0
    commits: int = 0


@dataclass
class _Pending:
    batch: list[SinkRecord] = field(default_factory=list)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    retry_at: float = 0.0


class WorkerSinkTask:
    def __init__(
        self,
        task_id: ConnectorTaskId,
        task: SinkTask,
        task_config: dict[str, str],
        *,
        key_converter: Converter,
        value_converter: Converter,
        chain: TransformationChain,
        source: SinkRecordSource,
        errors: ErrorPolicy = NO_TOLERANCE,
        dead_letters: DeadLetterSender | None = None,
        offset_flush_interval_ms: int = 60_000,
        max_poll_records: int = 500,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        active_topics: Callable[[str], None] = lambda topic: None,
    ) -> None:
        self.id = task_id
        # KIP-558: told the topic of every consumed record (``WorkerTask.recordActiveTopic``).
        self.active_topics = active_topics
        self.task = task
        self.task_config = dict(task_config)
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.chain = chain
        self.source = source
        self.errors = errors
        self.dead_letters = dead_letters
        self.flush_interval_s = offset_flush_interval_ms / 1000
        self.max_poll_records = max_poll_records
        self.clock = clock
        self.sleep = sleep
        self.context = BasicSinkTaskContext(self.task_config)
        self.metrics = SinkTaskMetrics()
        self.current_offsets: dict[
            TopicPartition, int
        ] = {}  # next offset to consume, delivered to put
        self.committed: dict[TopicPartition, int] = {}
        self._pending: _Pending | None = None
        self._next_commit = 0.0
        self._paused_for_retry = False
        self.paused_by_target = False  # the connector's target state is PAUSED

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.task.initialize(self.context)
        self.task.start(self.task_config)
        topics = [t.strip() for t in self.task_config.get("topics", "").split(",") if t.strip()]
        pattern = self.task_config.get("topics.regex") or None
        if not topics and pattern is None:
            raise ConnectException("Sink tasks require a list of topics or a topics.regex")
        self.source.subscribe(topics, pattern, self._on_assign, self._on_revoke)
        self._next_commit = self.clock() + self.flush_interval_s

    def stop(self) -> None:
        """Ask the loop to stop (from another thread). The task itself is stopped in
        :meth:`close`, on the loop's thread, as Kafka does: a sink task may still be in
        ``put`` or ``flush`` when the stop is requested."""

    def close(self, failed: bool = False) -> None:
        try:
            assigned = sorted(self.context.assignment())
            if assigned:
                self._commit(assigned)
                self.task.close(assigned)
        finally:
            try:
                self.source.close()  # may revoke partitions: the task must still be open
            finally:
                self.task.stop()
                self.chain.close()

    # -- partitions ----------------------------------------------------------------------

    def _on_assign(self, partitions: list[TopicPartition]) -> None:
        self.context.set_assignment(self.context.assignment() | set(partitions))
        self.task.open(partitions)

    def _on_revoke(self, partitions: list[TopicPartition]) -> None:
        self._commit(partitions)
        self.task.close(partitions)
        for tp in partitions:
            self.current_offsets.pop(tp, None)
        self.context.set_assignment(self.context.assignment() - set(partitions))
        if self._pending is not None:
            # Records of revoked partitions will be redelivered to their new owner.
            gone = set(partitions)
            self._pending.batch = [
                r for r in self._pending.batch if r.original_topic_partition not in gone
            ]

    # -- the loop ------------------------------------------------------------------------

    def iterate(self, poll_timeout_s: float = 0.5) -> int:
        """Deliver one batch (or retry the pending one); returns records put."""
        self._apply_context_requests()
        if self.paused_by_target:
            return self._poll_paused(poll_timeout_s)
        if self._pending is not None:
            wait = self._pending.retry_at - self.clock()
            if wait > 0:
                self.sleep(min(wait, poll_timeout_s))
                return 0
            delivered = self._deliver(self._pending.batch, self._pending.offsets)
        else:
            consumed = self.source.poll(poll_timeout_s, self.max_poll_records)
            self.metrics.consumed += len(consumed)
            batch, offsets = self._convert(consumed)
            delivered = self._deliver(batch, offsets)
        if self.context.take_commit_request() or self.clock() >= self._next_commit:
            self._commit(sorted(self.context.assignment()))
        return delivered

    def _poll_paused(self, poll_timeout_s: float) -> int:
        """Keep the group session while paused; anything fetched before the pause took
        effect is rewound, never delivered."""
        assigned = sorted(self.context.assignment())
        self.source.pause(assigned)
        first: dict[TopicPartition, int] = {}
        for raw in self.source.poll(poll_timeout_s, self.max_poll_records):
            first.setdefault(TopicPartition(raw.topic, raw.partition), raw.offset)
        for tp, offset in first.items():
            self.source.seek(tp, offset)
        self.source.pause(sorted(self.context.assignment()))
        return 0

    def _apply_context_requests(self) -> None:
        for tp, offset in self.context.take_offset_resets().items():
            if tp in self.context.assignment():
                self.source.seek(tp, offset)
                self.current_offsets[tp] = offset
        if not self._paused_for_retry and not self.paused_by_target:
            paused = self.context.paused()
            assigned = self.context.assignment()
            self.source.pause(sorted(paused))
            self.source.resume(sorted(assigned - paused))

    def _convert(
        self, consumed: Sequence[ConsumedRecord]
    ) -> tuple[list[SinkRecord], dict[TopicPartition, int]]:
        batch: list[SinkRecord] = []
        offsets: dict[TopicPartition, int] = {}
        for raw in consumed:
            offsets[TopicPartition(raw.topic, raw.partition)] = raw.offset + 1
            try:
                transformed = self._to_sink_record(raw)
            except Exception as exc:
                self._tolerate(raw, exc)
                continue
            if transformed is None:
                self.metrics.filtered += 1
            else:
                batch.append(transformed)
        return batch, offsets

    def _to_sink_record(self, raw: ConsumedRecord) -> SinkRecord | None:
        """Convert and transform one record (None: a transform dropped it)."""
        self.active_topics(raw.topic)
        key = self.errors.retrying(lambda: self.key_converter.to_connect_data(raw.topic, raw.key))
        value = self.errors.retrying(
            lambda: self.value_converter.to_connect_data(raw.topic, raw.value)
        )
        record = SinkRecord.create(
            raw.topic,
            raw.partition,
            raw.offset,
            value.value,
            value_schema=value.schema,
            key=key.value,
            key_schema=key.schema,
            timestamp=raw.timestamp,
            timestamp_type=raw.timestamp_type,
            headers=Headers.of(raw.headers),
        )
        return self.errors.retrying(lambda: self.chain.apply(record))

    def _tolerate(self, raw: ConsumedRecord, exc: Exception) -> None:
        self.errors.tolerate(self.id, exc, f"{raw.topic}-{raw.partition}@{raw.offset}")
        self.metrics.skipped_errors += 1
        if self.dead_letters is not None:
            self.dead_letters.send(raw, exc)
            self.metrics.dead_lettered += 1

    def _deliver(self, batch: list[SinkRecord], offsets: dict[TopicPartition, int]) -> int:
        try:
            self.task.put(batch)
        except RetriableException as exc:
            timeout_ms = self.context.timeout_ms or 0
            log.warning(
                "%s: retriable error from put(), retrying in %d ms: %s", self.id, timeout_ms, exc
            )
            self.metrics.retries += 1
            self._pending = _Pending(batch, offsets, self.clock() + timeout_ms / 1000)
            self._paused_for_retry = True
            self.source.pause(sorted(self.context.assignment()))
            return 0
        if self._paused_for_retry:
            self._paused_for_retry = False
            self.source.resume(sorted(self.context.assignment() - self.context.paused()))
        self._pending = None
        self.metrics.put += len(batch)
        assigned = self.context.assignment()
        self.current_offsets.update({tp: o for tp, o in offsets.items() if tp in assigned})
        return len(batch)

    def _commit(self, partitions: Sequence[TopicPartition]) -> None:
        self._next_commit = self.clock() + self.flush_interval_s
        current = {tp: self.current_offsets[tp] for tp in partitions if tp in self.current_offsets}
        if not current:
            return
        # The task decides what is durable (flush by default); only assigned partitions count.
        allowed = set(partitions)
        to_commit = {
            tp: offset
            for tp, offset in self.task.pre_commit(current).items()
            if tp in allowed and self.committed.get(tp) != offset
        }
        if not to_commit:
            return
        self.source.commit(to_commit)
        self.committed.update(to_commit)
        self.metrics.commits += 1
