"""The sink's input rows, column by column: what both task producers (librdkafka's and
oncelog's two-phase-commit one) read from an Arrow record batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncelog.spark.options import WriteOptions

if TYPE_CHECKING:
    import pyarrow as pa


class WriteError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Columns:
    """One Arrow batch of Spark's Kafka-sink rows, as Python lists (None: no such column)."""

    n: int
    fixed_topic: str | None  # the 'topic' option, which overrides the column
    topics: list[Any] | None
    keys: list[Any]
    values: list[Any]
    partitions: list[Any] | None
    headers: list[Any] | None

    def topic(self, i: int) -> str:
        topic = self.fixed_topic if self.topics is None else self.topics[i]
        if topic is None:
            raise WriteError("a row has a null 'topic' and no 'topic' option is set")
        return str(topic)


def columns(batch: pa.RecordBatch, opts: WriteOptions) -> Columns:
    n = batch.num_rows
    col = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    with_headers = "headers" in col and opts.include_headers
    return Columns(
        n=n,
        fixed_topic=opts.topic,
        topics=None if opts.topic is not None else col["topic"].to_pylist(),
        keys=col["key"].to_pylist() if "key" in col else [None] * n,
        values=col["value"].to_pylist(),
        partitions=col["partition"].to_pylist() if "partition" in col else None,
        headers=col["headers"].to_pylist() if with_headers else None,
    )


def as_bytes(data: Any) -> bytes | None:
    """A key or value column's cell (binary or string) as bytes."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return bytes(data)


def bad_partition(topic: str, partition: int, count: int) -> WriteError:
    """A row's ``partition`` that the topic does not have: the error names topic, partition
    and partition count (librdkafka would only report ``_UNKNOWN_PARTITION``)."""
    return WriteError(
        f"column 'partition' is {partition} but topic {topic!r} has {count} partition(s) "
        f"(0..{count - 1}); drop or fix the 'partition' column (e.g. df.drop('partition') "
        "when copying between topics of different sizes)"
    )
