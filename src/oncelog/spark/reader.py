"""Readers of the ``oncelog`` data source: batch (``spark.read``) and streaming
(``spark.readStream``), with Spark's Kafka source schema and options.

Planning (offsets, partitions) runs on the driver through the Kafka protocol (Metadata,
ListOffsets). Each input partition is one topic-partition range ``[start, end)``, read on
an executor by a confluent-kafka consumer that is *assigned* (no group membership, no
offset commits). Under ``read_committed`` (the default) the end of a range is at most the
last stable offset (LSO), librdkafka drops aborted records and control markers, and a range
whose last offsets are a control marker or aborted records still completes: the read stops
at the first record at or beyond ``end``, or at a partition-EOF event at or beyond ``end``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from oncelog.client.admin import EARLIEST as EARLIEST_OFFSET
from oncelog.client.admin import LATEST as LATEST_OFFSET
from oncelog.client.admin import Admin
from oncelog.client.range_reader import (
    OffsetOutOfRange,
    RangeConsumer,
    RecordChunk,
)
from oncelog.client.range_reader import read_range as client_read_range
from oncelog.spark.hooks import trace
from oncelog.spark.offsets import (
    Offsets,
    TopicPartition,
    distribute,
    from_json,
    group_ranges,
    split_ranges,
    to_json,
)
from oncelog.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OncelogOptionError,
    ReadOptions,
    TimestampSpec,
    display,
)
from oncelog.spark.pool import config_key, pooled

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("oncelog.spark")

ARROW_BATCH_ROWS = 10_000
READER_GROUP_ID = "oncelog-spark-reader"  # librdkafka requires one; never joined or committed


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic); failOnDataLoss=true."""


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class KafkaInputPartition(InputPartition):
    """One topic-partition offset range [start, end)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaInputPartition) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


class KafkaInputRanges(InputPartition):
    """Several offset ranges read one after the other by one task (``maxPartitions``)."""

    def __init__(self, ranges: Sequence[KafkaInputPartition]) -> None:
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = list(ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaInputRanges) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


# -- reading one range on an executor --------------------------------------------------------


def consumer_config(opts: ReadOptions) -> dict[str, Any]:
    # Names the reading consumers only (kafka.group.id in consumer_conf wins): they never
    # join the group nor commit to it; offsets stay in Spark's checkpoint.
    group = f"{opts.group_id_prefix}-reader" if opts.group_id_prefix else READER_GROUP_ID
    return {
        "group.id": group,
        "enable.sparse.connections": False,
        # A range usually ends at the end of the log (the LSO): the EOF event that finishes it
        # needs an empty fetch, which the broker would otherwise hold for 500 ms.
        "fetch.wait.max.ms": 10,
        # librdkafka pauses a partition whose local queue is full for this long (1 s by
        # default): a range read faster than the broker sends would stall.
        "fetch.queue.backoff.ms": 10,
        # librdkafka prefetches until 100,000 messages or 64 MB wait in its queue: past the
        # end of a range that is data fetched and thrown away (a 25,000-record range of a
        # longer partition pulled up to 64 MB more). A chunk's worth bounds the waste.
        "queued.min.messages": ARROW_BATCH_ROWS,
        "queued.max.messages.kbytes": 16_384,
        **opts.consumer_conf,
        "bootstrap.servers": opts.bootstrap,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": opts.isolation_level,
        "auto.offset.reset": "error" if opts.fail_on_data_loss else "earliest",
    }


def read_range(
    opts: ReadOptions,
    part: KafkaInputPartition,
    schema: StructType,
    batch_rows: int = ARROW_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches (Spark's Kafka schema) of the records in [start, end):
    each chunk of the client layer's range reader becomes one batch, built column by
    column (constant columns with ``pa.repeat``), never row by row."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    headers_type = arrow_schema.field("headers").type if opts.include_headers else None
    ts_type = arrow_schema.field("timestamp").type
    topic, partition, end = part.topic, part.partition, part.end
    topic_scalar = pa.scalar(topic, pa.string())
    partition_scalar = pa.scalar(partition, pa.int32())

    def batch(chunk: RecordChunk) -> pa.RecordBatch:
        n = len(chunk)
        arrays = [
            pa.array(chunk.keys, pa.binary()),
            pa.array(chunk.values, pa.binary()),
            pa.repeat(topic_scalar, n),
            pa.repeat(partition_scalar, n),
            pa.array(chunk.offsets, pa.int64()),
            pa.array(chunk.timestamps, pa.timestamp("ms")).cast(ts_type),
            pa.array(chunk.timestamp_types, pa.int32()),
        ]
        if headers_type is not None:
            assert chunk.headers is not None
            arrays.append(pa.array([_headers(h) for h in chunk.headers], headers_type))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    def timed_out(position: int) -> str:
        return (
            f"no data from {topic}-{partition} for {opts.poll_timeout_ms} ms while reading offsets "
            f"[{part.start}, {end}) (position {position}); see kafkaConsumer.pollTimeoutMs"
        )

    trace(f"read start {topic}-{partition} [{part.start}, {end})")
    conf = consumer_config(opts)
    # A pooled consumer (reused by the worker's next range of the same configuration),
    # unassigned before it goes back; closed if the read fails or is abandoned.
    with pooled(
        config_key("consumer", conf),
        lambda: RangeConsumer(conf),
        RangeConsumer.close,
        RangeConsumer.unassign,
    ) as consumer:
        chunks = client_read_range(
            consumer,
            topic,
            partition,
            part.start,
            end,
            chunk_records=batch_rows,
            poll_timeout_s=opts.poll_timeout_ms / 1000.0,
            with_headers=headers_type is not None,
            on_timeout=timed_out,
        )
        try:
            for chunk in chunks:
                yield batch(chunk)
        except OffsetOutOfRange as exc:
            raise DataLossError(
                f"offset {part.start} of {topic}-{partition} is out of range (deleted by retention?); "
                "set failOnDataLoss=false to skip lost data"
            ) from exc
    trace(f"read done {topic}-{partition}")


def _headers(h: Any) -> Any:
    return [{"key": kv[0], "value": kv[1]} for kv in h] if h else None


def read_partition(
    opts: ReadOptions, partition: InputPartition, schema: StructType
) -> Iterator[pa.RecordBatch]:
    """Read one planned input partition. When planning found nothing to read (an empty
    topic, only markers, no matching topic yet) Spark still runs one task with a bare
    ``InputPartition(None)``: it yields no rows."""
    if isinstance(partition, KafkaInputPartition):
        yield from read_range(opts, partition, schema)
    elif isinstance(partition, KafkaInputRanges):
        for part in partition.ranges:
            yield from read_range(opts, part, schema)


def list_offsets_for_times(
    admin: Admin, times: dict[TopicPartition, int], read_committed: bool
) -> Offsets:
    """ListOffsets by timestamp (-1 where no record has a timestamp >= the given one)."""
    return admin.offsets_for_times(times, read_committed=read_committed)


# -- planning on the driver -----------------------------------------------------------------


class _Planner:
    """Offset resolution shared by the batch and the streaming reader."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.admin = Admin(opts.client_config)

    def discover(self) -> list[TopicPartition]:
        cluster = self.admin.topics()
        selected = self.opts.subscription.select(cluster)
        return sorted((t, p) for t, ps in selected.items() for p in ps if p < cluster.get(t, 0))

    def latest(self, tps: Sequence[TopicPartition]) -> Offsets:
        return self.admin.list_offsets(tps, LATEST_OFFSET, read_committed=self.opts.read_committed)

    def earliest(self, tps: Sequence[TopicPartition]) -> Offsets:
        return self.admin.list_offsets(
            tps, EARLIEST_OFFSET, read_committed=self.opts.read_committed
        )

    def resolve(
        self, spec: OffsetSpec, tps: Sequence[TopicPartition], key: str, unlisted: int
    ) -> Offsets:
        """Offsets for 'earliest' / 'latest' / JSON specs; JSON-unlisted partitions get
        ``unlisted`` (-2 earliest / -1 latest)."""
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        assert isinstance(spec, dict)
        present = set(tps)
        for topic, parts in spec.items():
            for p in parts:
                if (topic, p) not in present:
                    raise OncelogOptionError(
                        f"option '{display(key)}' names {topic}-{p}, which does not exist (or is not subscribed)"
                    )
        wanted = {tp: spec.get(tp[0], {}).get(tp[1], unlisted) for tp in tps}
        need_e = [tp for tp, o in wanted.items() if o == EARLIEST]
        need_l = [tp for tp, o in wanted.items() if o == LATEST]
        resolved = {**self.earliest(need_e), **self.latest(need_l)}
        return {tp: resolved.get(tp, o) for tp, o in wanted.items()}

    def by_timestamp(
        self, spec: TimestampSpec, tps: Sequence[TopicPartition], key: str, *, starting: bool
    ) -> Offsets:
        """ListOffsets by timestamp: the first offset whose timestamp is >= the given one.
        None found: an ending offset is the latest; a starting offset follows
        startingOffsetsByTimestampStrategy ('error' fails, 'latest' starts at the latest)."""
        if spec.per_partition is not None:
            missing = [f"{t}-{p}" for t, p in tps if spec.timestamp(t, p) is None]
            unknown = [
                f"{t}-{p}"
                for t, ps in spec.per_partition.items()
                for p in ps
                if (t, p) not in set(tps)
            ]
            if missing or unknown:
                raise OncelogOptionError(
                    f"option '{display(key)}' must name every partition read and no other "
                    f"(Spark's rule); missing: {missing or 'none'}, not read: {unknown or 'none'}"
                )
        found = list_offsets_for_times(
            self.admin, {tp: int(spec.timestamp(*tp) or 0) for tp in tps}, self.opts.read_committed
        )
        latest = self.latest([tp for tp, o in found.items() if o < 0])
        out: Offsets = {}
        for tp, offset in found.items():
            if offset >= 0:
                out[tp] = offset
            elif starting and self.opts.timestamp_strategy == "error":
                raise OncelogOptionError(
                    f"option '{display(key)}': {tp[0]}-{tp[1]} has no record with a timestamp at or "
                    f"after {spec.timestamp(*tp)}; set startingOffsetsByTimestampStrategy=latest to "
                    "start at the latest offset instead"
                )
            else:
                out[tp] = latest[tp]
        return out

    def starting(self, tps: Sequence[TopicPartition]) -> Offsets:
        ts = self.opts.starting_by_timestamp
        if ts is not None:
            key = "startingtimestamp" if ts.everywhere is not None else "startingoffsetsbytimestamp"
            return self.by_timestamp(ts, tps, key, starting=True)
        return self.resolve(self.opts.starting, tps, "startingoffsets", EARLIEST)

    def ending(self, tps: Sequence[TopicPartition]) -> Offsets:
        ts = self.opts.ending_by_timestamp
        if ts is not None:
            key = "endingtimestamp" if ts.everywhere is not None else "endingoffsetsbytimestamp"
            return self.by_timestamp(ts, tps, key, starting=False)
        assert self.opts.ending is not None
        return self.resolve(self.opts.ending, tps, "endingoffsets", LATEST)

    def plan(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        """Input partitions for start..end; partitions new in ``end`` start at earliest.
        Checks for data loss against the log start offsets. A partition is one range, or
        several (:class:`KafkaInputRanges`) when ``maxPartitions`` groups them."""
        live = set(self.discover())
        ranges = [tp for tp in end if tp not in start or end[tp] > start[tp]]
        earliest = self.earliest([tp for tp in ranges if tp in live])
        out: list[KafkaInputPartition] = []
        for tp in sorted(ranges):
            topic, p = tp
            stop = end[tp]
            if tp not in live:
                self._lost(f"{topic}-{p} no longer exists; offsets up to {stop} cannot be read")
                continue
            begin = start.get(tp, earliest[tp])
            if begin < earliest[tp]:
                self._lost(
                    f"{topic}-{p}: offsets {begin}..{earliest[tp] - 1} were deleted (log start offset {earliest[tp]})"
                )
                begin = earliest[tp]
            if stop > begin:
                out.append(KafkaInputPartition(topic, p, begin, stop))
        pieces = split_ranges(
            [(x.topic, x.partition, x.start, x.end) for x in out],
            self.opts.min_partitions,
            self.opts.max_records_per_partition,
        )
        parts: list[InputPartition] = []
        for group in group_ranges(pieces, self.opts.max_partitions):
            members = [KafkaInputPartition(*r) for r in group]
            parts.append(members[0] if len(members) == 1 else KafkaInputRanges(members))
        for tp in sorted(set(start) & set(end)):
            if end[tp] < start[tp]:
                self._lost(
                    f"{tp[0]}-{tp[1]}: end offset {end[tp]} is below start offset {start[tp]} (topic recreated?)"
                )
        return parts

    def _lost(self, what: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"{what}. Some data may have been lost; set failOnDataLoss=false to continue past it"
            )
        log.warning("oncelog source: %s; skipping (failOnDataLoss=false)", what)


class OncelogBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        planner = _Planner(self.opts, self.schema)
        try:
            tps = planner.discover()
            start = planner.starting(tps)
            end = planner.ending(tps)
            parts: Sequence[InputPartition] = planner.plan(start, end)
        finally:
            planner.admin.close()
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.opts, partition, self.schema)


class OncelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets: {"topic": {"partition": next offset}}."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._planner: _Planner | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: never read beyond this
        self._latest: Offsets | None = None
        self._last_batch = time.monotonic()  # maxTriggerDelay counts from here

    def __getstate__(self) -> dict[str, Any]:
        return {
            "opts": self.opts,
            "schema": self.schema,
            "_planner": None,
            "_target": None,
            "_latest": None,
            "_last_batch": 0.0,
        }

    @property
    def planner(self) -> _Planner:
        if self._planner is None:
            self._planner = _Planner(self.opts, self.schema)
        return self._planner

    def initialOffset(self) -> dict:
        trace("initialOffset")
        return to_json(self.planner.starting(self.planner.discover()))

    def getDefaultReadLimit(self) -> ReadLimit:
        # PySpark 4.3 has no composite limit: ReadMinRows or ReadMaxRows stand for "limited";
        # latestOffset applies both minOffsetsPerTrigger and maxOffsetsPerTrigger itself.
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.planner.latest(self.planner.discover())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        trace("latestOffset")
        begin = from_json(start)
        if self._target is not None:
            available = dict(self._target)
        else:
            available = self.planner.latest(self.planner.discover())
            self._latest = dict(available)
        end: Offsets = dict(begin)
        new = [tp for tp in available if tp not in begin]
        for tp, offset in available.items():
            end[tp] = max(begin[tp], offset) if tp in begin else offset
        if isinstance(limit, ReadAllAvailable):
            return to_json(end)
        origin = {**self.planner.earliest(new), **begin}
        if self._target is None and not self._enough(origin, end):
            return to_json(begin)  # wait for minOffsetsPerTrigger (or maxTriggerDelay)
        max_rows = self.opts.max_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        if max_rows is not None:
            end = distribute(origin, end, max_rows)
        if end != begin:
            self._last_batch = time.monotonic()
        return to_json(end)

    def _enough(self, origin: Offsets, end: Offsets) -> bool:
        """minOffsetsPerTrigger: a batch needs that many new offsets, unless maxTriggerDelay
        passed since the last batch (Spark's rule); an empty batch is never started."""
        backlog = sum(max(0, end[tp] - origin.get(tp, end[tp])) for tp in end)
        wanted = self.opts.min_offsets_per_trigger
        if wanted is None or backlog >= wanted:
            return True
        waited_ms = (time.monotonic() - self._last_batch) * 1000
        return backlog > 0 and waited_ms >= self.opts.max_trigger_delay_ms

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        trace("partitions")
        return self.planner.plan(from_json(start), from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.opts, partition, self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark checkpoints the offsets; no consumer group is used."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.admin.close()
