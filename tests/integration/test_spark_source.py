"""The oncelog Spark source against a real broker and a real local Spark: read_committed
streaming and batch reads, offsets, admission control, markers, discovery, data loss."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import read_topic

from .apps.spark_common import (
    Sent,
    create_topic,
    leave_open_transaction,
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


def stream(spark: Any, bootstrap: str, tmp_path: Path, **options: str) -> Any:
    """Run a streaming read with Trigger.AvailableNow into a memory table; return the query."""
    name = unique("mem").replace("-", "_")
    reader = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120), "AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    return q


def committed_reference(bootstrap: str, topic: str, partitions: int) -> set[tuple[Any, ...]]:
    """What an ordinary read_committed consumer sees: (partition, offset, key, value, headers)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ref",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: set[tuple[Any, ...]] = set()
    eof: set[int | None] = set()
    deadline = time.monotonic() + 30
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(1000, 0.2):
            if m.error():
                eof.add(m.partition())
            else:
                out.add((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
    c.close()
    return out


def test_streaming_read_yields_exactly_the_committed_records(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 2)
    txns = []
    for n in range(8):
        recs = [
            Sent(
                i % 2,
                b"k-%d-%d" % (n, i),
                b"v-%d-%d" % (n, i),
                [("n", b"%d" % n), ("i", b"%d" % i), ("none", None)] if i % 3 else None,
            )
            for i in range(40)
        ]
        txns.append((n % 3 != 1, recs))
    produce_transactions(b, topic, txns)
    committed_values = {r.value for ok, recs in txns if ok for r in recs}

    q = stream(spark, b, tmp_path, subscribe=topic, includeHeaders="true")
    rows = spark.sql(f"select * from {q.name}").collect()
    assert {r.value for r in rows} == committed_values
    assert len(rows) == len(committed_values)
    got = {
        (r.partition, r.offset, r.key, r.value, tuple((h.key, h.value) for h in r.headers or ()))
        for r in rows
    }
    assert got == committed_reference(b, topic, 2)
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}
    assert all(abs(r.timestamp.timestamp() - time.time()) < 600 for r in rows)
    # Without includeHeaders the schema is exactly Spark's Kafka source schema.
    schema = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", topic)
        .load()
        .schema
    )
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]


def test_max_offsets_per_trigger_bounds_each_micro_batch(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 3)
    produce_plain(b, topic, [b"v%d" % i for i in range(900)], 3)
    q = stream(spark, b, tmp_path, subscribe=topic, maxOffsetsPerTrigger="200")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [200, 200, 200, 200, 100]
    assert len(sizes) == math.ceil(900 / 200)
    assert spark.sql(f"select count(distinct value) from {q.name}").collect()[0][0] == 900


def test_transactional_input_batches_count_offsets_not_rows(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    # Aborted records and control markers use offsets too: batches stay within the budget.
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 1)
    produce_transactions(
        b,
        topic,
        [
            (n % 2 == 0, [Sent(0, None, b"%d-%d" % (n, i), None) for i in range(30)])
            for n in range(10)
        ],
    )
    q = stream(spark, b, tmp_path, subscribe=topic, maxOffsetsPerTrigger="50")
    sizes = [p["numInputRows"] for p in q.recentProgress]
    assert sum(sizes) == 150 and max(sizes) <= 50
    assert len(
        [
            p
            for p in q.recentProgress
            if p["numInputRows"] or p["sources"][0]["endOffset"] != p["sources"][0]["startOffset"]
        ]
    ) == math.ceil(310 / 50)


def test_ranges_ending_on_markers_and_aborted_records_complete(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 1)
    # offsets 0-9 committed, 10 commit marker, 11-20 aborted, 21 abort marker
    produce_transactions(
        b,
        topic,
        [
            (True, [Sent(0, None, b"c%d" % i, None) for i in range(10)]),
            (False, [Sent(0, None, b"a%d" % i, None) for i in range(10)]),
        ],
    )

    def batch_read(end: str) -> list[bytes]:
        df = (
            spark.read.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", topic)
            .option("endingOffsets", end)
            .option("kafkaConsumer.pollTimeoutMs", "15000")
            .load()
        )
        return sorted(r.value for r in df.collect())

    ten = sorted(b"c%d" % i for i in range(10))
    for end in (
        "10",
        "11",
        "15",
        "21",
        "22",
    ):  # on the commit marker, after it, mid-abort, on the abort marker, LSO
        started = time.monotonic()
        assert batch_read(f'{{"{topic}": {{"0": {end}}}}}') == ten, end
        assert time.monotonic() - started < 10, f"range ending at {end} did not complete promptly"
    assert batch_read("latest") == ten
    assert batch_read(f'{{"{topic}": {{"0": 5}}}}') == ten[:5]
    # An open transaction after them: the LSO stays at 22 and the stream still completes.
    leave_open_transaction(b, topic, unique("open"), [b"open-1", b"open-2"])
    q = stream(spark, b, tmp_path, subscribe=topic)
    assert sorted(r.value for r in spark.sql(f"select value from {q.name}").collect()) == ten
    assert json.loads(q.lastProgress["sources"][0]["endOffset"]) == {topic: {"0": 22}}


def test_batch_read_with_json_offsets(spark: Any, spark_broker: EmbeddedBroker) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 2)
    produce_plain(b, topic, [b"v%d" % i for i in range(100)], 2)
    df = (
        spark.read.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}": {{"0": 5, "1": -2}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"0": 20, "1": -1}}}}')
        .load()
    )
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(5, 20)] + [
        (1, o) for o in range(50)
    ]
    assign = (
        spark.read.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("assign", f'{{"{topic}": [1]}}')
        .load()
    )
    assert assign.count() == 50


def test_new_partitions_and_topics_are_picked_up(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, prefix = spark_broker.bootstrap, unique("pat")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(b, first, 1)
    produce_plain(b, first, [b"a0-%d" % i for i in range(10)], 1)
    name = unique("mem").replace("-", "_")
    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribePattern", f"{prefix}-.*")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:

        def count() -> int:
            return int(spark.sql(f"select count(*) from {name}").collect()[0][0])

        deadline = time.monotonic() + 60
        while count() < 10 and time.monotonic() < deadline:
            time.sleep(0.3)
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_partitions([NewPartitions(first, 2)])[first].result(15)
        create_topic(b, second, 1)
        produce_plain(
            b, first, [b"a1-%d" % i for i in range(10)], 2
        )  # half of them to the new partition 1
        produce_plain(b, second, [b"b0-%d" % i for i in range(10)], 1)
        while count() < 30 and time.monotonic() < deadline:
            time.sleep(0.3)
        rows = spark.sql(f"select topic, partition, value from {name}").collect()
    finally:
        q.stop()
    assert len(rows) == 30
    assert {(r.topic, r.partition) for r in rows} == {(first, 0), (first, 1), (second, 0)}


def test_fail_on_data_loss(spark: Any, spark_broker: EmbeddedBroker) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 1)
    produce_plain(b, topic, [b"v%d" % i for i in range(20)], 1)
    admin = AdminClient({"bootstrap.servers": b})
    admin.delete_records([TopicPartition(topic, 0, 8)])[TopicPartition(topic, 0, 8)].result(15)

    def read(fail: str) -> Any:
        return (
            spark.read.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", topic)
            .option("startingOffsets", f'{{"{topic}": {{"0": 2}}}}')
            .option("failOnDataLoss", fail)
            .load()
        )

    with pytest.raises(Exception, match="failOnDataLoss"):
        read("true").collect()
    assert sorted(r.offset for r in read("false").collect()) == list(range(8, 20))


def test_option_errors_name_the_option(spark: Any, spark_broker: EmbeddedBroker) -> None:
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("oncelog").option("subscribe", "x").load().collect()
    with pytest.raises(Exception, match="startingOffsets"):
        spark.read.format("oncelog").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).option("subscribe", "x").option("startingOffsets", "{oops").load().collect()
    with pytest.raises(Exception, match="subscribe.*assign"):
        spark.readStream.format("oncelog").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).option("subscribe", "x").option("assign", '{"x":[0]}').load()


def test_read_uncommitted_sees_aborted_records(spark: Any, spark_broker: EmbeddedBroker) -> None:
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 1)
    produce_transactions(
        b, topic, [(True, [Sent(0, None, b"c", None)]), (False, [Sent(0, None, b"a", None)])]
    )

    def df() -> Any:  # a DataFrameReader is mutable: a fresh one each time
        return (
            spark.read.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", topic)
        )

    assert sorted(
        r.value for r in df().option("kafka.isolation.level", "read_uncommitted").load().collect()
    ) == [b"a", b"c"]
    assert [r.value for r in df().load().collect()] == [b"c"]
    assert [r.value for r in read_topic(b, topic)] == [b"c"]


def test_python_workers_import_pyspark_from_its_package(spark: Any) -> None:
    """spark_session() runs the workers under oncelog.spark.daemon: pyspark comes from the
    installed package (with its bytecode cache), not from the pyspark.zip Spark puts first
    on the workers' path."""
    import pyspark

    def where(_: object) -> tuple[str, bool, bool]:
        import gc
        import os
        import sys

        import pyspark as worker_pyspark

        return (
            os.path.realpath(worker_pyspark.__file__ or ""),
            any(p.endswith("pyspark.zip") for p in sys.path),
            # the daemon imported the data source's modules and froze them before forking
            gc.get_freeze_count() > 50_000,
        )

    found = spark.sparkContext.parallelize([0], 1).map(where).collect()
    # (real paths: the virtualenv may be reached through a symlink)
    assert found == [(os.path.realpath(pyspark.__file__), False, True)]


def _processes_running(module: str) -> list[list[str]]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in argv:
            found.append([a.decode() for a in argv if a])
    return found


def test_a_streaming_source_runs_under_the_launcher(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """spark_session() gives Spark oncelog-spark-python: the per-query process of a Python
    streaming source (python_streaming_source_runner) imports pyspark from its package."""
    b, topic = spark_broker.bootstrap, unique()
    create_topic(b, topic, 1)
    produce_plain(b, topic, [b"x"], 1)
    q = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("launcher_probe")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        q.processAllAvailable()
        runners = _processes_running("pyspark.sql.streaming.python_streaming_source_runner")
        assert runners, "no python_streaming_source_runner process"
        # argv: the interpreter (the script's shebang), the launcher script, -m, the module
        assert all(r[1].endswith("/oncelog-spark-python") for r in runners), runners
    finally:
        q.stop()


def test_local_workers_talk_over_a_private_unix_socket(spark: Any) -> None:
    """spark_session() with a local master: the JVM and its Python workers use Unix domain
    sockets in a directory only this user can enter (Spark does not authenticate them)."""
    import stat
    import tempfile

    # The context's own settings (a later spark_session() call in this process reuses the
    # running context and must not name another directory).
    conf = spark.sparkContext.getConf()
    if len(tempfile.gettempdir()) + len("/oncelog-spark-12345678") > 60:
        # A temporary directory too deep for sockaddr_un: spark_session() keeps TCP.
        assert conf.get("spark.python.unix.domain.socket.enabled") is None
        return
    assert conf.get("spark.python.unix.domain.socket.enabled") == "true"
    where = Path(conf.get("spark.python.unix.domain.socket.dir"))
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert spark.sparkContext.parallelize([1, 2], 1).map(lambda x: x * 2).collect() == [2, 4]
    sockets = [p for p in where.iterdir() if p.is_socket()]
    assert sockets, f"no Unix socket in {where}"
    # Another spark_session() in this process gets the running session and names no other
    # directory (the session conf would otherwise claim one nothing uses).
    from oncelog.spark import spark_session

    again = spark_session("oncelog-tests-again", master="local[2,4]")
    assert again.sparkContext is spark.sparkContext
    assert again.conf.get("spark.python.unix.domain.socket.dir") == str(where)
