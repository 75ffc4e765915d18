"""No lingering transactions: a micro-batch that fails for good, a driver SIGKILLed in the
middle of a batch, and a transaction timeout the broker would refuse. Whatever happens, the
output's last stable offset catches up with its high watermark within seconds, not after
``transactionTimeoutMs``, and ``oncelog transactions find-hanging`` reports nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import open_transactions, read_topic, stable

from .apps.spark_common import (
    DriverProcess,
    create_topic,
    produce_plain,
    spark,
    spark_broker,
    unique,
)
from .test_spark_sink import assert_exactly_once, no_leftovers, transactional_input

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures

PREFIX = "oncelog-spark"


def no_hanging(bootstrap: str) -> None:
    out = CliRunner().invoke(
        app,
        ["transactions", "find-hanging", "-b", bootstrap, "--max-transaction-timeout-ms", "0"],
    )
    assert out.exit_code == 0, out.output
    assert "no hanging transactions" in out.output, out.output


def open_forever(bootstrap: str, topic: str, txn_id: str) -> None:
    """Like a dead task attempt: a transaction with records, left open (10 min timeout)."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 600_000,
            "enable.sparse.connections": False,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"zombie", partition=0)
    assert p.flush(30) == 0
    del p


def wait_settled(bootstrap: str, topic: str, id_prefix: str, within: float) -> float:
    """Seconds until nothing of id_prefix is open and the topic's LSO == HW (or fail)."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        if not open_transactions(bootstrap, id_prefix) and stable(bootstrap, topic):
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(
        f"after {within} s: open {open_transactions(bootstrap, id_prefix)}, "
        f"stable={stable(bootstrap, topic)}"
    )


def test_a_batch_that_fails_for_good_leaves_no_open_transaction(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Task 1 writes slowly; task 0 fails on every attempt once task 1's transaction holds
    records. The job fails, Spark cancels task 1 (no commit message), the query fails:
    the driver's abort must abort task 1's transaction by its deterministic id."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    prefix = unique("fail")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    produce_plain(b, src, [b"r-%04d-" % i + b"x" * 1000 for i in range(800)], 2)

    @F.udf(BinaryType())
    def fail_task_0(value: bytes, partition: int) -> bytes:
        from pyspark import TaskContext

        from oncelog.testing.verify import open_transactions

        ctx = TaskContext.get()
        assert ctx is not None
        if ctx.partitionId() == 1:
            time.sleep(0.05)  # 400 rows: 20 s, far longer than task 0 takes to fail 4 times
            return value
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            t.endswith("-1-0") for t in open_transactions(b, prefix + "-")
        ):
            time.sleep(0.1)
        raise RuntimeError("injected failure of task 0 (every attempt)")

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    try:
        q = (
            spark.readStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", fail_task_0("value", "partition").alias("value"))
            .writeStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("topic", dst)
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        with pytest.raises(Exception, match="injected failure of task 0"):
            q.awaitTermination(180)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    failed_at = time.monotonic()
    assert q.exception() is not None
    # Task 1's transaction held records when the job failed (it is what we wait for).
    assert len(read_topic(b, dst, isolation="read_uncommitted")) > 0
    settled = wait_settled(b, dst, prefix + "-", within=10.0)
    assert time.monotonic() - failed_at < 10.0, f"settled after {settled:.1f} s"
    assert read_topic(b, dst) == [], "nothing of the failed batch may be visible"
    no_hanging(b)


@pytest.mark.timeout(900)  # two driver runs, each starting a JVM
def test_a_restart_after_a_driver_kill_cleans_up_before_writing(
    spark_broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver is SIGKILLed while batch 1's tasks hold open transactions; an id the
    replay will not reuse (a dead attempt) is open too. The restarted query aborts them
    before its first task writes; the output is exactly once, nothing hangs."""
    monkeypatch.setenv("ONCELOG_SPARK_TRACE", "1")
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    expected = transactional_input(b, src, 2, txns=12, per_txn=50)
    ck, log = tmp_path / "ck", tmp_path / "driver.log"
    # Long timeouts, so that the coordinator does not abort them first: JVM start-ups on a
    # loaded machine take longer than the default 60 s.
    common: dict[str, Any] = {
        "input": src,
        "output": dst,
        "max_offsets": 200,
        "extra": ["--transaction-timeout-ms", "600000"],
    }
    d = DriverProcess(b, ck, log, kill_at="task-after-flush@1", **common)
    try:
        assert d.wait(300) == -9, d.tail()
    finally:
        d.kill()
    query_id = json.loads((ck / "metadata").read_text().splitlines()[0])["id"]
    dead = f"{PREFIX}-{query_id}-7-3"
    open_forever(b, dst, dead)
    assert f"{PREFIX}-{query_id}-0-0" in open_transactions(b, PREFIX + "-")
    assert not stable(b, dst)

    d = DriverProcess(b, ck, log, available_now=True, **common)
    try:
        assert d.wait(400) == 0, d.tail()
    finally:
        d.kill()
    text = log.read_text().split("==== ")[-1]
    cleaned = text.index("before write: aborted ")
    line = text[cleaned : text.index("\n", cleaned)]
    assert dead in line and f"{PREFIX}-{query_id}-0-0" in line, line
    assert cleaned < text.index("write start"), "the restart wrote before cleaning up"
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    no_hanging(b)


def test_a_transaction_timeout_above_the_brokers_maximum_fails_at_start(
    spark: Any, tmp_path: Path
) -> None:
    broker = EmbeddedBroker(
        tmp_path / "data", settings={"transaction.max.timeout.ms": "30000"}
    ).start()
    try:
        b, src, dst = broker.bootstrap, unique("src"), unique("dst")
        create_topic(b, src, 1)
        create_topic(b, dst, 1)
        produce_plain(b, src, [b"a", b"b"], 1)
        q = (
            spark.readStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("topic", dst)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        with pytest.raises(Exception) as err:
            q.awaitTermination(120)
        text = str(err.value)
        assert (
            "option 'transactionTimeoutMs' (60000 ms) exceeds the broker's "
            "transaction.max.timeout.ms (30000 ms)" in text
        ), text
        assert open_transactions(b, PREFIX + "-") == []
        with pytest.raises(Exception, match="transaction.max.timeout.ms"):
            (
                spark.createDataFrame([("x",)], "value string")
                .write.format("oncelog")
                .mode("append")
                .option("kafka.bootstrap.servers", b)
                .option("topic", dst)
                .save()
            )
        # Within the broker's limit, the same query runs.
        q = (
            spark.readStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("topic", dst)
            .option("transactionTimeoutMs", "30000")
            .option("checkpointLocation", str(tmp_path / "ck2"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None
        assert sorted(r.value for r in read_topic(b, dst)) == [b"a", b"b"]
    finally:
        broker.stop()


def test_stopping_a_query_mid_batch_leaves_no_open_transaction(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """query.stop() while a task is in the middle of its transaction: Spark cancels the
    batch and calls abort; the interrupted task's transaction is aborted by its id."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    prefix = unique("stop")
    create_topic(b, src, 1)
    create_topic(b, dst, 1)
    produce_plain(b, src, [b"s-%04d-" % i + b"x" * 1000 for i in range(400)], 1)

    @F.udf(BinaryType())
    def slow(value: bytes) -> bytes:
        time.sleep(0.1)
        return value

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        q = (
            spark.readStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", slow("value").alias("value"))
            .writeStream.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("topic", dst)
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not open_transactions(b, prefix + "-"):
            time.sleep(0.2)
        assert open_transactions(b, prefix + "-"), "the batch never opened its transaction"
        q.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    wait_settled(b, dst, prefix + "-", within=10.0)
    assert read_topic(b, dst) == []
    no_hanging(b)
