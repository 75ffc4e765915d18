"""Parity with Spark's Kafka connector: Java's murmur2 partitioning of keyed rows, a bad
``partition`` column, batch save modes, and empty reads (empty topics, ranges holding only
transaction markers and aborted records, a pattern that matches no topic yet)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oncelog.client.partitioner import murmur2
from oncelog.client.partitioner import partition_for_key as java_partition
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import read_topic

from .apps.spark_common import (
    Sent,
    create_topic,
    produce_transactions,
    spark,
    spark_broker,
    unique,
)

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures

# Kafka's UtilsTest.testMurmur2: org.apache.kafka.common.utils.Utils.murmur2 (Java).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_reference_matches_javas_values() -> None:
    assert {k: murmur2(k) for k in JAVA_MURMUR2} == JAVA_MURMUR2
    assert java_partition(b"foobar", 50) == 16 and java_partition(b"foobar", 10) == 6


def write(
    spark: Any, rows: list[tuple], schema: str, options: dict[str, str], mode: str | None
) -> None:
    w = spark.createDataFrame(rows, schema).write.format("oncelog")
    for k, v in options.items():
        w = w.option(k, v)
    if mode is not None:
        w = w.mode(mode)
    w.save()


def test_keyed_rows_land_on_javas_murmur2_partitions(
    spark: Any, spark_broker: EmbeddedBroker
) -> None:
    b, topic = spark_broker.bootstrap, unique("keyed")
    create_topic(b, topic, 7)
    keys = list(JAVA_MURMUR2) + [b"key-%d" % i for i in range(200)]
    rows = [(k, b"v-" + k) for k in keys]
    write(
        spark,
        rows,
        "key binary, value binary",
        {"kafka.bootstrap.servers": b, "topic": topic},
        "append",
    )
    got = {r.key: r.partition for r in read_topic(b, topic)}
    assert got == {k: java_partition(k, 7) for k in keys}
    assert set(got.values()) == set(range(7))


def test_a_partition_the_topic_does_not_have_fails_clearly(
    spark: Any, spark_broker: EmbeddedBroker
) -> None:
    b, topic = spark_broker.bootstrap, unique("small")
    create_topic(b, topic, 2)
    with pytest.raises(Exception) as err:
        write(
            spark,
            [("a", 0), ("b", 5)],
            "value string, partition int",
            {"kafka.bootstrap.servers": b, "topic": topic},
            "append",
        )
    assert f"column 'partition' is 5 but topic '{topic}' has 2 partition(s) (0..1)" in str(
        err.value
    ), str(err.value)[-2000:]
    assert read_topic(b, topic) == []
    # Dropping the column (as docs/spark.md shows) lets the sink partition the rows.
    (
        spark.createDataFrame([("a", 0), ("b", 5)], "value string, partition int")
        .drop("partition")
        .write.format("oncelog")
        .mode("append")
        .option("kafka.bootstrap.servers", b)
        .option("topic", topic)
        .save()
    )
    assert sorted(r.value for r in read_topic(b, topic)) == [b"a", b"b"]


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("append", None),
        ("overwrite", "save mode Overwrite is not allowed for the oncelog sink"),
        ("ignore", 'cannot be written in the "Ignore" mode'),
        ("errorifexists", 'cannot be written in the "ErrorIfExists" mode'),
        (None, 'cannot be written in the "ErrorIfExists" mode'),
    ],
)
def test_batch_save_modes(
    spark: Any, spark_broker: EmbeddedBroker, mode: str | None, message: str | None
) -> None:
    """Append is accepted; Overwrite is refused by the sink (a topic cannot be replaced);
    Ignore, ErrorIfExists and the default (ErrorIfExists) are refused by PySpark 4.3 itself
    for every Python data source, before the source is asked (see docs/spark.md)."""
    b, topic = spark_broker.bootstrap, unique("modes")
    create_topic(b, topic, 1)
    opts = {"kafka.bootstrap.servers": b, "topic": topic}
    if message is None:
        write(spark, [("x",), ("y",)], "value string", opts, mode)
        # two rows may come from two Spark tasks, in either order
        assert sorted(r.value for r in read_topic(b, topic)) == [b"x", b"y"]
        return
    with pytest.raises(Exception, match=message.replace("(", r"\(")):
        write(spark, [("x",), ("y",)], "value string", opts, mode)
    assert read_topic(b, topic, isolation="read_uncommitted") == []


# -- empty reads ------------------------------------------------------------------------------


def batch_rows(spark: Any, b: str, **options: str) -> list[Any]:
    r = spark.read.format("oncelog").option("kafka.bootstrap.servers", b)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load().collect()


def stream_rows(spark: Any, b: str, tmp: Path, **options: str) -> list[Any]:
    r = spark.readStream.format("oncelog").option("kafka.bootstrap.servers", b)
    for k, v in options.items():
        r = r.option(k, v)
    name = unique("q").replace("-", "_")
    q = (
        r.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp / name))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    return spark.sql(f"select * from {name}").collect()


def test_empty_reads_return_no_rows(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b = spark_broker.bootstrap
    empty, aborted = unique("empty"), unique("aborted")
    create_topic(b, empty, 2)
    create_topic(b, aborted, 2)
    # Only aborted records and markers: every range ends on a marker, no row is visible.
    produce_transactions(
        b, aborted, [(False, [Sent(i % 2, None, b"gone-%d" % i, None) for i in range(10)])] * 3
    )
    assert len(read_topic(b, aborted, isolation="read_uncommitted")) == 30
    assert batch_rows(spark, b, subscribe=empty) == []
    assert batch_rows(spark, b, subscribe=aborted) == []
    assert batch_rows(spark, b, subscribePattern=f"nothing-{unique()}.*") == []
    assert stream_rows(spark, b, tmp_path, subscribe=empty, startingOffsets="earliest") == []
    assert stream_rows(spark, b, tmp_path, subscribe=aborted, startingOffsets="earliest") == []
    assert (
        stream_rows(
            spark, b, tmp_path, subscribePattern=f"nothing-{unique()}.*", startingOffsets="earliest"
        )
        == []
    )
