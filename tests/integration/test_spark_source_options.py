"""Spark Kafka options of the oncelog source (and the sink's includeHeaders), each against
a real broker and a real local Spark, asserting exact rows and offsets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from oncelog.embedded import EmbeddedBroker

from .apps.spark_common import (
    Sent,
    create_topic,
    produce_plain,
    produce_transactions,
    spark,
    spark_broker,
    unique,
)

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures


def produce_timed(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    """Offset i of every partition has timestamp 1000 * (i + 1)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for part in range(partitions):
        for i in range(n):
            p.produce(topic, value=b"%d-%d" % (part, i), partition=part, timestamp=1000 * (i + 1))
            p.flush(10)  # one batch per record: each keeps its own timestamp
    assert p.flush(30) == 0


def offsets(rows: list[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in rows:
        out.setdefault(r.partition, []).append(r.offset)
    return {p: sorted(o) for p, o in sorted(out.items())}


def read_batch(spark: Any, b: str, topic: str, **options: str) -> list[Any]:
    r = spark.read.format("oncelog").option("kafka.bootstrap.servers", b).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load().collect()


def test_offsets_by_timestamp(spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path) -> None:
    b, t = spark_broker.bootstrap, unique("ts")
    create_topic(b, t, 2)
    produce_timed(b, t, 2, 10)
    r = range
    assert offsets(read_batch(spark, b, t, startingTimestamp="5000")) == {
        0: list(r(4, 10)),
        1: list(r(4, 10)),
    }
    by_ts = f'{{"{t}": {{"0": 3000, "1": 8000}}}}'
    assert offsets(read_batch(spark, b, t, startingOffsetsByTimestamp=by_ts)) == {
        0: list(r(2, 10)),
        1: list(r(7, 10)),
    }
    # startingTimestamp wins over startingOffsetsByTimestamp, as in Spark
    both = read_batch(spark, b, t, startingTimestamp="9000", startingOffsetsByTimestamp=by_ts)
    assert offsets(both) == {0: [8, 9], 1: [8, 9]}
    # ending offsets by timestamp are exclusive; none found means latest
    assert offsets(read_batch(spark, b, t, endingTimestamp="4000")) == {0: [0, 1, 2], 1: [0, 1, 2]}
    end_ts = f'{{"{t}": {{"0": 2000, "1": 99999}}}}'
    assert offsets(read_batch(spark, b, t, endingOffsetsByTimestamp=end_ts)) == {
        0: [0],
        1: list(r(10)),
    }
    # no record at or after the starting timestamp: 'error' (default) fails, 'latest' reads nothing
    with pytest.raises(Exception, match="has no record with a timestamp at or after 99999"):
        read_batch(spark, b, t, startingTimestamp="99999")
    assert (
        read_batch(
            spark, b, t, startingTimestamp="99999", startingOffsetsByTimestampStrategy="latest"
        )
        == []
    )
    with pytest.raises(Exception, match="must name every partition"):
        read_batch(spark, b, t, startingOffsetsByTimestamp=f'{{"{t}": {{"0": 1000}}}}')
    # streaming: the timestamp fixes where the query starts
    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", t)
        .option("startingTimestamp", "8000")
        .load()
        .writeStream.format("memory")
        .queryName("by_ts")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120) and q.exception() is None
    assert offsets(spark.sql("select * from by_ts").collect()) == {0: [7, 8, 9], 1: [7, 8, 9]}


def test_min_partitions_and_max_records_per_partition(
    spark: Any, spark_broker: EmbeddedBroker
) -> None:
    b, t, tx = spark_broker.bootstrap, unique("big"), unique("bigtx")
    create_topic(b, t, 1)
    create_topic(b, tx, 2)
    produce_plain(b, t, [b"v-%03d" % i for i in range(100)], 1)

    def load(topic: str, **options: str) -> Any:
        r = spark.read.format("oncelog").option("kafka.bootstrap.servers", b)
        r = r.option("subscribe", topic)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    df = load(t, maxRecordsPerPartition="30")
    assert df.rdd.getNumPartitions() == 4  # [0,30) [30,60) [60,90) [90,100)
    assert offsets(df.collect()) == {0: list(range(100))}
    df = load(t, minPartitions="5")
    assert df.rdd.getNumPartitions() == 5
    assert offsets(df.collect()) == {0: list(range(100))}
    # Split transactional input: ranges cut through transactions, markers and aborted records.
    committed: list[bytes] = []
    txns = []
    for n in range(10):
        recs = [Sent(i % 2, None, b"t-%d-%d" % (n, i), None) for i in range(10)]
        txns.append((n % 3 != 2, recs))
        committed += [x.value for x in recs] if n % 3 != 2 else []
    produce_transactions(b, tx, txns)
    df = load(tx, maxRecordsPerPartition="7", minPartitions="12")
    assert df.rdd.getNumPartitions() >= 12
    assert sorted(r.value for r in df.collect()) == sorted(committed)


def test_min_offsets_per_trigger_and_max_trigger_delay(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, t = spark_broker.bootstrap, unique("mint")
    create_topic(b, t, 1)
    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", t)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "50")
        .option("maxTriggerDelay", "15s")
        .load()
        .selectExpr("cast(value as string) as v")
        .writeStream.format("memory")
        .queryName("min_trigger")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="250 milliseconds")
        .start()
    )

    def rows() -> list[str]:
        return sorted(r.v for r in spark.sql("select v from min_trigger").collect())

    def wait_rows(n: int, timeout: float) -> float:
        start = time.monotonic()
        while len(rows()) < n and time.monotonic() - start < timeout:
            time.sleep(0.2)
        assert len(rows()) == n, rows()
        return time.monotonic() - start

    try:
        produce_plain(b, t, [b"a-%02d" % i for i in range(60)], 1)  # >= 50: a batch at once
        wait_rows(60, 90)
        produce_plain(b, t, [b"b-%02d" % i for i in range(20)], 1)  # < 50: waits for the delay
        time.sleep(3)
        assert len(rows()) == 60, "20 offsets < minOffsetsPerTrigger must wait"
        wait_rows(80, 60)
        assert rows() == sorted(
            [f"a-{i:02d}" for i in range(60)] + [f"b-{i:02d}" for i in range(20)]
        )
        # The memory sink shows a batch's rows before the query posts its progress.
        deadline = time.monotonic() + 30
        while True:
            sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
            if sum(sizes) >= 80 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sizes == [60, 20]
    finally:
        q.stop()


def test_group_id_options_name_the_readers_only(spark: Any, spark_broker: EmbeddedBroker) -> None:
    b, t = spark_broker.bootstrap, unique("grp")
    create_topic(b, t, 2)
    produce_plain(b, t, [b"g-%d" % i for i in range(10)], 2)
    want = {0: [0, 1, 2, 3, 4], 1: [0, 1, 2, 3, 4]}
    assert offsets(read_batch(spark, b, t, **{"kafka.group.id": "analytics"})) == want
    assert offsets(read_batch(spark, b, t, groupIdPrefix="team-a")) == want
    admin = AdminClient({"bootstrap.servers": b})
    from confluent_kafka import ConsumerGroupTopicPartitions

    for group in ("analytics", "team-a-reader"):
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        committed = [tp for tp in res[group].result(15).topic_partitions if tp.offset >= 0]
        assert committed == [], f"{group} committed offsets: the checkpoint holds them"


def test_sink_include_headers(spark: Any, spark_broker: EmbeddedBroker) -> None:
    b = spark_broker.bootstrap
    with_h, without_h = unique("hdr"), unique("nohdr")
    create_topic(b, with_h, 1)
    create_topic(b, without_h, 1)
    df = spark.createDataFrame(
        [("v1", [("h", b"x")])], "value string, headers array<struct<key:string,value:binary>>"
    )
    for topic, flag in ((with_h, "true"), (without_h, "false")):
        (
            df.write.format("oncelog")
            .mode("append")
            .option("kafka.bootstrap.servers", b)
            .option("topic", topic)
            .option("includeHeaders", flag)
            .save()
        )
    got = read_batch(spark, b, with_h, includeHeaders="true")
    assert [(r.value, [(h.key, h.value) for h in r.headers]) for r in got] == [
        (b"v1", [("h", b"x")])
    ]
    got = read_batch(spark, b, without_h, includeHeaders="true")
    assert [(r.value, r.headers) for r in got] == [(b"v1", None)]
