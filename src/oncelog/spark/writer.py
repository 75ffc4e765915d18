"""Writers of the ``oncelog`` data source: executor side.

Input columns are those of Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``topic`` (string; the ``topic`` option overrides it),
``partition`` (int; null or absent: librdkafka's partitioner) and ``headers``
(array<struct<key:string,value:binary>>). Other columns are ignored, as Spark does.

Exactly-once writes *prepare* on the executor: a transactional producer per task (id
``{prefix}-{queryId}-{partitionId}-{attempt}``) begins a transaction, produces the task's
rows, flushes, learns its producer id and epoch and returns them in its commit message,
leaving the transaction open. The driver commits (see :mod:`oncelog.spark.commit`).

Two task producers: oncelog's own, which opens a two-phase-commit transaction (KIP-939,
:mod:`oncelog.spark.two_phase`) when the broker allows it and ``exactlyOnce.twoPhaseCommit``
is ``auto`` or ``true``; otherwise librdkafka's (:class:`BatchProducer`), whose producer id
and epoch come from DescribeTransactions.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from oncelog.client.record_producer import ANY_PARTITION, RecordProducer
from oncelog.spark import commit as protocol
from oncelog.spark import lifecycle, metrics, two_phase
from oncelog.spark.commit import OncelogCommitMessage, transactional_id
from oncelog.spark.hooks import point, trace
from oncelog.spark.options import OncelogOptionError, WriteOptions
from oncelog.spark.pool import POOL, config_key, pooled_decisions, pooled_txn_admin
from oncelog.spark.rows import Columns, WriteError, bad_partition, columns

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("oncelog.spark")

INIT_TIMEOUT_S = 60.0
FLUSH_TIMEOUT_S = 300.0


__all__ = ["WriteError"]


# -- input validation (driver, at planning) -------------------------------------------------

_HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


def _same(a: DataType, b: DataType) -> bool:
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return [f.name for f in a.fields] == [f.name for f in b.fields] and all(
            _same(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True)
        )
    return type(a) is type(b)


def validate_input(schema: StructType, opts: WriteOptions) -> None:
    cols = {f.name.lower(): f.dataType for f in schema.fields}
    rules: dict[str, tuple[tuple[DataType, ...], str]] = {
        "value": ((BinaryType(), StringType()), "binary or string"),
        "key": ((BinaryType(), StringType()), "binary or string"),
        "topic": ((StringType(),), "string"),
        "partition": ((IntegerType(),), "int"),
        "headers": ((_HEADERS,), "array<struct<key:string,value:binary>>"),
    }
    if "value" not in cols:
        raise OncelogOptionError(
            f"the oncelog sink needs a 'value' column (binary or string); the input has {schema.simpleString()}"
        )
    for name, (types, text) in rules.items():
        if name in cols and not any(_same(cols[name], t) for t in types):
            raise OncelogOptionError(
                f"column '{name}' must be {text}, got {cols[name].simpleString()}"
            )
    if opts.topic is None and "topic" not in cols:
        raise OncelogOptionError("no topic: set the option 'topic' or provide a 'topic' column")


# -- producing Arrow batches ------------------------------------------------------------------


class BatchProducer:
    """Produces Spark's Kafka-sink rows from Arrow record batches with one librdkafka
    producer of the client layer (:class:`RecordProducer`), created lazily on the first
    row (an empty task opens no transaction)."""

    def __init__(self, opts: WriteOptions, conf: dict[str, Any], txn_id: str | None) -> None:
        self.opts = opts
        self.txn_id = txn_id
        self.conf = {
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            # Connect to every broker at once: with sparse connections librdkafka often
            # waits for its 500 ms coordinator timer before InitProducerId.
            "enable.sparse.connections": False,
            # Java's partitioner (murmur2 of the key; null keys spread), as Spark's Kafka
            # sink and every Java producer use: the same key lands on the same partition.
            "partitioner": "murmur2_random",
            **opts.producer_conf,
            **conf,
            "bootstrap.servers": opts.bootstrap,
        }
        self.producer: RecordProducer | None = None
        self.pool_key: Any = None
        self.records = 0
        self.partition_counts: dict[str, int] = {}
        self.on_start: Callable[[], None] | None = None

    @property
    def errors(self) -> list[str]:
        return self.producer.errors if self.producer is not None else []

    def _start(self) -> RecordProducer:
        if self.txn_id is None:
            # Idempotent producers are pooled (a transactional one never is: the driver
            # ends its transaction, after which the instance is stale).
            conf = self.conf
            self.pool_key = config_key("producer", conf)
            producer = POOL.take(self.pool_key, lambda: RecordProducer(conf))
            producer.errors.clear()  # a previous task's, already reported
            self.producer = producer
            return producer
        producer = self.producer = RecordProducer(self.conf)
        producer.init_transactions(INIT_TIMEOUT_S)
        if self.on_start is not None:
            self.on_start()
        producer.begin_transaction()
        return producer

    def produce(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        producer = self.producer if self.producer is not None else self._start()
        cols = columns(batch, self.opts)
        if cols.topics is None:
            topics: Any = itertools.repeat(cols.fixed_topic, n)
        else:
            if None in cols.topics:
                cols.topic(cols.topics.index(None))  # raises the null-topic error
            topics = cols.topics
        parts: Any = itertools.repeat(ANY_PARTITION, n)
        if cols.partitions is not None:
            self.check_partitions(cols)
            parts = [ANY_PARTITION if p is None else p for p in cols.partitions]
        headers = None
        if cols.headers is not None:
            headers = [[(h["key"], h["value"]) for h in hs] if hs else None for hs in cols.headers]
        producer.send(topics, cols.values, cols.keys, parts, headers)
        self.records += n

    def check_partitions(self, cols: Columns) -> None:
        """Every row's ``partition`` must exist: checked once per batch and topic."""
        assert cols.partitions is not None
        if cols.topics is None:
            present = [p for p in cols.partitions if p is not None]
            if present:
                assert cols.fixed_topic is not None
                self.check_partition(cols.fixed_topic, min(present))
                self.check_partition(cols.fixed_topic, max(present))
            return
        for topic, p in set(zip(cols.topics, cols.partitions, strict=True)):
            if p is not None:
                self.check_partition(topic, p)

    def check_partition(self, topic: str, partition: int) -> None:
        """A row's ``partition`` must exist: fail the task naming topic, partition and
        partition count (librdkafka would only report ``_UNKNOWN_PARTITION``)."""
        assert self.producer is not None
        count = self.partition_counts.get(topic)
        if count is None:
            count = self.producer.partition_count(topic, INIT_TIMEOUT_S)
            self.partition_counts[topic] = count
        if not 0 <= partition < count:
            raise bad_partition(topic, partition, count)

    def flush(self) -> None:
        if self.producer is None:
            return
        left = self.producer.flush(FLUSH_TIMEOUT_S)
        if left:
            raise WriteError(f"{left} records not delivered within {FLUSH_TIMEOUT_S:.0f} s")
        if self.errors:
            raise WriteError(f"delivery failed: {'; '.join(self.errors)}")

    def give_back(self) -> None:
        """An idempotent producer whose records are all delivered serves the next task."""
        producer = self.producer
        if producer is not None and self.txn_id is None:
            POOL.give(self.pool_key, producer, producer.close)

    def abort_quietly(self) -> None:
        """After a failure: abort the open transaction now rather than leave it to a later
        commit's clean-up (best effort; never used on the success path)."""
        if self.producer is not None and self.txn_id is not None:
            try:
                self.producer.abort_transaction(10)
            except Exception as exc:  # noqa: BLE001 - best effort
                log.info("abort of %s after a failed task: %s", self.txn_id, exc)

    def drop(self) -> None:
        """Destroy the producer *without* ending the transaction: it stays open (prepared)
        for the driver to commit."""
        self.producer = None


def _txn_config(opts: WriteOptions, txn_id: str) -> dict[str, Any]:
    return {
        "transactional.id": txn_id,
        "transaction.timeout.ms": opts.transaction_timeout_ms,
        "enable.idempotence": True,
    }


def _idempotent_config() -> dict[str, Any]:
    return {"enable.idempotence": True}


def write_at_least_once(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    producer = BatchProducer(opts, _idempotent_config(), None)
    for batch in batches:
        producer.produce(batch)
    producer.flush()
    producer.give_back()
    return producer.records


def prepare_transaction(
    opts: WriteOptions,
    txn_id: str,
    batches: Iterator[pa.RecordBatch],
    *,
    kill_batch: int | None = None,
) -> tuple[int, int, int]:
    """Produce every row in one open transaction of ``txn_id`` and flush it; return
    (records, producer_id, producer_epoch), or (0, -1, -1) if there was no row. A
    two-phase-commit transaction when wanted and the broker allows it, else librdkafka's."""
    if two_phase.wanted(opts):
        first = next((b for b in batches if b.num_rows), None)
        if first is None:
            return 0, -1, -1  # an empty task opens no transaction
        batches = itertools.chain([first], batches)
        try:
            return two_phase.prepare(opts, txn_id, batches, kill_batch=kill_batch)
        except two_phase.TwoPhaseCommitUnavailable as exc:
            if opts.two_phase_commit == "true":
                raise WriteError(
                    f"option 'exactlyOnce.twoPhaseCommit=true', but {exc}. Enable "
                    "transaction.two.phase.commit.enable (and the TWO_PHASE_COMMIT ACL) on the "
                    "brokers, or set exactlyOnce.twoPhaseCommit to auto or false"
                ) from exc
            two_phase.refused(opts, exc)
    producer = BatchProducer(opts, _txn_config(opts, txn_id), txn_id)
    with pooled_txn_admin(opts.client_config) as txns:
        initial: list[Any] = []

        def on_start() -> None:
            # Our incarnation, right after InitProducerId: whoever holds the id later fenced us.
            initial.append(txns.describe_txn(txn_id))

        producer.on_start = on_start
        try:
            for batch in batches:
                producer.produce(batch)
            if producer.records == 0:
                return 0, -1, -1
            producer.flush()
            state = txns.describe_txn(txn_id)
            first = initial[0] if initial else None
            if (
                state is None
                or first is None
                or state.transaction_state != "Ongoing"
                or (state.producer_id, state.producer_epoch)
                != (first.producer_id, first.producer_epoch)
            ):
                got = (
                    "unknown"
                    if state is None
                    else f"{state.transaction_state} pid={state.producer_id} epoch={state.producer_epoch}"
                )
                raise WriteError(
                    f"transaction {txn_id!r} was fenced or ended by another producer while this task wrote it ({got})"
                )
            if kill_batch is not None:
                point("task-after-flush", kill_batch)
            result = (producer.records, int(state.producer_id), int(state.producer_epoch))
        except BaseException:
            producer.abort_quietly()
            raise
    producer.drop()
    return result


def decided_through(opts: WriteOptions, query_id: str) -> int:
    """The decision store's last decided batch, through a pooled store of the query."""
    with pooled_decisions(opts.client_config, opts.transactional_id_prefix, query_id) as store:
        return store.decided_through()


# -- Spark writer classes ---------------------------------------------------------------------


def _task_context() -> Any:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise WriteError("the oncelog sink must run inside a Spark task (no TaskContext)")
    return ctx


class OncelogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: exactly-once by default (see docs/spark.md)."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        validate_input(schema, opts)
        self.opts = opts
        if opts.exactly_once and lifecycle.in_write_planning():
            # Spark plans the next micro-batch's write: none of its tasks runs yet and the
            # previous batch is committed, so whatever of this query is open is a leftover.
            lifecycle.before_write(opts, opts.checkpoint)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OncelogCommitMessage:
        ctx = _task_context()
        partition_id, attempt = ctx.partitionId(), ctx.attemptNumber()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        trace(f"write start batch={batch_id} partition={partition_id} attempt={attempt}")
        if not self.opts.exactly_once:
            n = write_at_least_once(self.opts, iterator)
            return OncelogCommitMessage(
                partition_id, attempt, n, query_id=query_id, batch_id=batch_id
            )
        if query_id is None or batch_id < 0:
            raise WriteError("no streaming query id / batch id in the task's local properties")
        decided = decided_through(self.opts, query_id)
        if decided >= batch_id:
            # A replay of a batch whose decision survived a driver crash: its transactions
            # are prepared and will be rolled forward by commit(); touching the transactional
            # ids now (InitProducerId) would abort them.
            for _ in iterator:
                pass
            log.info(
                "batch %d already decided (through %d): task %d writes nothing",
                batch_id,
                decided,
                partition_id,
            )
            return OncelogCommitMessage(
                partition_id, attempt, 0, query_id=query_id, batch_id=batch_id, skipped=True
            )
        txn_id = transactional_id(
            self.opts.transactional_id_prefix, query_id, partition_id, attempt
        )
        trace(f"write decided_through={decided} batch={batch_id} partition={partition_id}")
        n, pid, epoch = prepare_transaction(
            self.opts, txn_id, iterator, kill_batch=batch_id if partition_id == 0 else None
        )
        trace(f"write prepared batch={batch_id} partition={partition_id} records={n}")
        if n == 0:
            return OncelogCommitMessage(
                partition_id, attempt, 0, query_id=query_id, batch_id=batch_id
            )
        return OncelogCommitMessage(
            partition_id, attempt, n, txn_id, pid, epoch, query_id, batch_id
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        trace(f"commit start batch={batchId}")
        started = time.perf_counter()
        ours = _ours(messages)
        committed = aborted = 0
        if self.opts.exactly_once:
            committed, aborted = protocol.commit_batch(self.opts, ours, batchId)
        self._report(batchId, "committed", ours, committed, aborted, started)
        trace(f"commit done batch={batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        started = time.perf_counter()
        ours = _ours(messages)
        aborted = 0
        if self.opts.exactly_once:
            aborted = protocol.abort_batch(
                self.opts, ours, batchId, lifecycle.checkpoint_query_id(self.opts.checkpoint)
            )
        self._report(batchId, "aborted", ours, 0, aborted, started)

    def _report(
        self,
        batch_id: int,
        outcome: str,
        messages: list[OncelogCommitMessage | None],
        committed: int,
        aborted: int,
        started: float,
    ) -> None:
        metrics.report(
            self.opts.checkpoint,
            metrics.BatchMetrics(
                batch_id=batch_id,
                outcome=outcome,
                records=sum(m.records for m in messages if m is not None),
                transactions_committed=committed,
                transactions_aborted=aborted,
                commit_latency_ms=round((time.perf_counter() - started) * 1000, 3),
                exactly_once=self.opts.exactly_once,
                timestamp_ms=metrics.now_ms(),
            ),
        )


class OncelogBatchWriter(DataSourceArrowWriter):
    """Batch sink (``df.write``): one transaction per task, all committed by the driver
    after every task succeeded; a failed job commits nothing."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        validate_input(schema, opts)
        self.opts = opts
        self.job_id = uuid.uuid4().hex[:16]
        if opts.exactly_once and lifecycle.in_write_planning():
            lifecycle.check_transaction_timeout(opts)

    @property
    def txn_prefix(self) -> str:
        return f"{self.opts.transactional_id_prefix}-job-{self.job_id}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> OncelogCommitMessage:
        ctx = _task_context()
        partition_id, attempt = ctx.partitionId(), ctx.attemptNumber()
        if not self.opts.exactly_once:
            return OncelogCommitMessage(
                partition_id, attempt, write_at_least_once(self.opts, iterator)
            )
        txn_id = f"{self.txn_prefix}-{partition_id}-{attempt}"
        n, pid, epoch = prepare_transaction(self.opts, txn_id, iterator)
        if n == 0:
            return OncelogCommitMessage(partition_id, attempt, 0)
        return OncelogCommitMessage(partition_id, attempt, n, txn_id, pid, epoch)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            protocol.commit_job(self.opts, _ours(messages), self.txn_prefix + "-")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            protocol.abort_job(self.opts, _ours(messages), self.txn_prefix + "-")


def _ours(messages: list[WriterCommitMessage | None]) -> list[OncelogCommitMessage | None]:
    out: list[OncelogCommitMessage | None] = []
    for m in messages:
        if m is not None and not isinstance(m, OncelogCommitMessage):
            raise WriteError(f"unexpected commit message {m!r}")
        out.append(m)
    return out
