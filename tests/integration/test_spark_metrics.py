"""The sink's per-micro-batch metrics (oncelog.spark.sink_metrics) against a real broker
and a real local Spark: each batch's records and transactions match what Spark's own
progress says the batch read, in both sink modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oncelog.embedded import EmbeddedBroker
from oncelog.spark import BatchMetrics, sink_metrics
from oncelog.testing.verify import read_topic

from .apps.spark_common import create_topic, produce_plain, spark, spark_broker, unique

pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures


def run(spark: Any, bootstrap: str, source: str, out: str, checkpoint: Path, eos: bool) -> Any:
    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "200")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("exactlyOnce", str(eos).lower())
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "query did not finish"
    assert q.exception() is None, q.exception()
    return q


def partitions_read(progress: dict[str, Any]) -> int:
    """Topic-partitions whose offsets moved in this batch, from Spark's own progress."""
    src = progress["sources"][0]

    def parse(value: Any) -> dict[str, dict[str, int]]:
        parsed = json.loads(value) if isinstance(value, str) else value
        return parsed or {}

    start, end = parse(src["startOffset"]), parse(src["endOffset"])
    return sum(
        1
        for topic, parts in end.items()
        for p, offset in parts.items()
        if offset > start.get(topic, {}).get(p, 0)
    )


@pytest.mark.parametrize("eos", [True, False], ids=["exactly-once", "at-least-once"])
def test_sink_metrics_match_each_batch(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path, eos: bool
) -> None:
    b = spark_broker.bootstrap
    source, out = unique("msrc"), unique("mout")
    create_topic(b, source, 2)
    create_topic(b, out, 2)
    produce_plain(b, source, [b"v-%04d" % i for i in range(500)], 2)
    q = run(spark, b, source, out, tmp_path / "ck", eos)

    progress = [p for p in q.recentProgress if p["numInputRows"]]
    got = sink_metrics(str(tmp_path / "ck"))
    assert [m.batch_id for m in got] == [p["batchId"] for p in progress]
    assert [m.records for m in got] == [p["numInputRows"] for p in progress]
    assert sum(m.records for m in got) == 500 == len(read_topic(b, out))
    assert [m.transactions_committed for m in got] == [
        partitions_read(p) if eos else 0 for p in progress
    ]
    assert all(isinstance(m, BatchMetrics) for m in got)
    assert {(m.outcome, m.transactions_aborted, m.exactly_once) for m in got} == {
        ("committed", 0, eos)
    }
    # exactly-once: decision, EndTxns and clean-up are round trips; at-least-once: nothing.
    assert all(m.commit_latency_ms > 0 if eos else m.commit_latency_ms >= 0 for m in got)
    # One JSON line per committed batch (Spark's empty last check of availableNow commits
    # nothing and writes none).
    lines = (tmp_path / "ck" / "oncelog" / "sink-metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(progress)


def test_max_partitions_groups_ranges_into_fewer_tasks(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """maxPartitions: a batch read of 3 partitions in 2 Spark partitions reads every offset
    once; a streaming exactly-once copy with maxPartitions=1 runs one task, so one
    transaction, per micro-batch, and copies every record exactly once."""
    b = spark_broker.bootstrap
    source, out = unique("mpsrc"), unique("mpout")
    create_topic(b, source, 3)
    create_topic(b, out, 3)
    produce_plain(b, source, [b"v-%04d" % i for i in range(600)], 3)
    df = (
        spark.read.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", source)
        .option("maxPartitions", "2")
        .load()
    )
    assert df.rdd.getNumPartitions() == 2
    rows = df.collect()
    assert sorted((r.partition, r.offset) for r in rows) == [
        (p, o) for p in range(3) for o in range(200)
    ]

    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "250")
        .option("maxPartitions", "1")
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("topic", out)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "query did not finish"
    assert q.exception() is None, q.exception()
    got = sink_metrics(str(tmp_path / "ck"))
    assert [m.records for m in got] == [250, 250, 100]
    assert [m.transactions_committed for m in got] == [1, 1, 1]
    copied = read_topic(b, out)
    assert sorted(r.value for r in copied) == [b"v-%04d" % i for i in range(600)]
    # The partition column is kept: every record lands in the partition it came from.
    assert {(r.partition, int(r.value[2:]) % 3) for r in copied} == {(0, 0), (1, 1), (2, 2)}
