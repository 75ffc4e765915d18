"""The oncelog Spark sink against a real broker and a real local Spark: batch writes,
exactly-once streaming writes under task failures, driver SIGKILLs at every stage of a
micro-batch, leftover transactions, and a driver outage longer than the transaction timeout."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import open_transactions, read_topic, stable

from .apps.spark_common import (
    DriverProcess,
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

PREFIX = "oncelog-spark"


def transactional_input(
    bootstrap: str, topic: str, partitions: int, txns: int, per_txn: int, abort_every: int = 4
) -> list[bytes]:
    """Write txns transactions (every abort_every-th aborted); return the committed values."""
    batches = []
    committed: list[bytes] = []
    for n in range(txns):
        recs = [
            Sent(i % partitions, b"k-%d-%d" % (n, i), b"v-%05d-%03d" % (n, i), None)
            for i in range(per_txn)
        ]
        ok = n % abort_every != abort_every - 1
        batches.append((ok, recs))
        if ok:
            committed += [r.value for r in recs]
    produce_transactions(bootstrap, topic, batches)
    return committed


def assert_exactly_once(bootstrap: str, topic: str, expected: list[bytes]) -> None:
    got = Counter(r.value or b"" for r in read_topic(bootstrap, topic))
    want = Counter(expected)
    dups = {v: n for v, n in got.items() if n > want.get(v, 0) and v in want}
    missing = [v for v in want if v not in got]
    extra = [v for v in got if v not in want]
    assert not dups and not missing and not extra, (
        f"{len(dups)} duplicated (e.g. {list(dups)[:3]}), {len(missing)} missing (e.g. {missing[:3]}), {len(extra)} unexpected"
    )
    assert sum(got.values()) == len(expected)


def no_leftovers(bootstrap: str, topic: str, id_prefix: str = PREFIX + "-") -> None:
    assert open_transactions(bootstrap, id_prefix) == []
    assert stable(bootstrap, topic), "an open transaction pins the LSO below the high watermark"


def run_stream(
    spark: Any,
    bootstrap: str,
    source: str,
    checkpoint: Path,
    sink_options: dict[str, str],
    transform: Any = None,
    source_options: dict[str, str] | None = None,
) -> Any:
    r = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    for k, v in (source_options or {}).items():
        r = r.option(k, v)
    df = r.load()
    df = transform(df) if transform is not None else df.selectExpr("key", "value")
    w = (
        df.writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", str(checkpoint))
    )
    for k, v in sink_options.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    assert q.awaitTermination(180), "query did not finish"
    assert q.exception() is None, q.exception()
    return q


# -- batch writes ---------------------------------------------------------------------------


def test_batch_write_and_read_round_trip(spark: Any, spark_broker: EmbeddedBroker) -> None:
    batch_round_trip(spark, spark_broker.bootstrap)


def batch_round_trip(spark: Any, b: str) -> None:
    """Rows with keys, values, topic, partition and headers columns written by a batch job
    and read back the same (also used with two-phase-commit tasks)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    t1, t2 = unique("w1"), unique("w2")
    create_topic(b, t1, 3)
    create_topic(b, t2, 1)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", StringType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    rows = []
    for i in range(300):
        topic = t1 if i % 5 else t2
        partition = (i % 3 if topic == t1 else 0) if i % 2 else None
        headers = [("i", b"%d" % i), ("nil", None)] if i % 7 == 0 else None
        rows.append((b"k%d" % i if i % 11 else None, f"value-{i}", topic, partition, headers))
    df = spark.createDataFrame(rows, schema).repartition(4)
    df.write.format("oncelog").option("kafka.bootstrap.servers", b).mode("append").save()

    back = (
        spark.read.format("oncelog")
        .option("kafka.bootstrap.servers", b)
        .option("subscribe", f"{t1},{t2}")
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = sorted(
        (
            (r.key, r.value.decode(), r.topic, tuple((h.key, h.value) for h in r.headers or ()))
            for r in back
        ),
        key=repr,
    )
    want = sorted(((k, v, t, tuple(h or ())) for k, v, t, _, h in rows), key=repr)
    assert got == want
    by_value = {r.value.decode(): r.partition for r in back}
    assert all(by_value[v] == p for _, v, _, p, _ in rows if p is not None)
    for t in (t1, t2):
        no_leftovers(b, t)


def test_batch_write_needs_a_topic_and_a_value(spark: Any, spark_broker: EmbeddedBroker) -> None:
    df = spark.createDataFrame([("a",)], "v string")
    with pytest.raises(Exception, match="'value' column"):
        df.write.format("oncelog").option("kafka.bootstrap.servers", spark_broker.bootstrap).option(
            "topic", "x"
        ).mode("append").save()
    with pytest.raises(Exception, match="topic"):
        df.selectExpr("v as value").write.format("oncelog").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).mode("append").save()


# -- streaming writes in process ------------------------------------------------------------


def test_streaming_copy_is_exactly_once_and_leaves_nothing_open(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 3)
    expected = transactional_input(b, src, 2, txns=12, per_txn=50)
    q = run_stream(spark, b, src, tmp_path / "ck", {"topic": dst})
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst, f"{PREFIX}-{q.id}-")
    # Re-running the finished query writes nothing more.
    run_stream(spark, b, src, tmp_path / "ck", {"topic": dst})
    assert_exactly_once(b, dst, expected)


def test_failed_and_retried_task_leaves_no_duplicates(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    # 1 KB values: the UDF worker's output buffer (64 KB) fills and flushes rows on to the
    # writer while the UDF still runs.
    values = [b"r-%04d-" % i + b"x" * 1000 for i in range(600)]
    produce_plain(b, src, values, 2)

    @F.udf(BinaryType())
    def fail_first_attempt(value: bytes, offset: int) -> bytes:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if (
            ctx is not None
            and ctx.partitionId() == 0
            and ctx.attemptNumber() == 0
            and offset >= 250
        ):
            # Fail only once the attempt's transaction holds records (the rows before this
            # one flow on to the writer while this UDF waits), so that the failed attempt
            # leaves written-but-uncommitted output behind.
            with Admin(ClientConfig(b)) as admin:
                deadline = time.monotonic() + 20
                while (
                    time.monotonic() < deadline
                    and sum(
                        admin.list_offsets(
                            [(dst, 0), (dst, 1)], LATEST, read_committed=False
                        ).values()
                    )
                    == 0
                ):
                    time.sleep(0.1)
            raise RuntimeError("injected failure of attempt 0")
        return value

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        q = run_stream(
            spark,
            b,
            src,
            tmp_path / "ck",
            {"topic": dst},
            transform=lambda df: df.select(
                "key", fail_first_attempt("value", "offset").alias("value")
            ),
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert_exactly_once(b, dst, values)
    no_leftovers(b, dst, f"{PREFIX}-{q.id}-")
    with TxnAdmin(ClientConfig(b)) as txns:
        ids = {t.transactional_id for t in txns.list_transactions(("CompleteCommit",))}
    assert f"{PREFIX}-{q.id}-0-1" in ids, "the retried attempt (attempt 1) committed partition 0"
    aborted = len(read_topic(b, dst, isolation="read_uncommitted")) - len(values)
    assert aborted > 0, "attempt 0 should have written (then lost) some records"


def test_leftover_transaction_of_a_dead_attempt_is_aborted_by_the_next_batch(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 1)
    create_topic(b, dst, 1)
    produce_plain(b, src, [b"a-%d" % i for i in range(50)], 1)
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
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 90
        while len(read_topic(b, dst)) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        # A task attempt of this query died with its transaction open (e.g. a lost executor
        # or a speculative duplicate): it pins the LSO of the output.
        dead = f"{PREFIX}-{q.id}-7-3"
        leave_open_transaction(b, dst, dead, [b"zombie-1", b"zombie-2"])
        assert dead in open_transactions(b, f"{PREFIX}-{q.id}-")
        assert not stable(b, dst)
        produce_plain(b, src, [b"b-%d" % i for i in range(50)], 1)
        # The next micro-batch aborts the leftover before its tasks write (and its commit
        # would): wait for that batch's rows too before stopping the query.
        while (
            open_transactions(b, f"{PREFIX}-{q.id}-")
            or not stable(b, dst)
            or len(read_topic(b, dst)) < 100
        ) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert open_transactions(b, f"{PREFIX}-{q.id}-") == [], (
            "the next micro-batch did not abort the leftover"
        )
        assert stable(b, dst)
    finally:
        q.stop()
    assert_exactly_once(b, dst, [b"a-%d" % i for i in range(50)] + [b"b-%d" % i for i in range(50)])


def test_at_least_once_mode_uses_no_transactions(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    values = [b"x-%d" % i for i in range(200)]
    produce_plain(b, src, values, 2)
    q = run_stream(
        spark,
        b,
        src,
        tmp_path / "ck",
        {"topic": dst, "exactlyOnce": "false", "transactionalIdPrefix": "alo"},
    )
    assert sorted(r.value or b"" for r in read_topic(b, dst)) == sorted(values)
    with TxnAdmin(ClientConfig(b)) as txns:
        assert not [
            t for t in txns.list_transactions(()) if t.transactional_id.startswith(f"alo-{q.id}")
        ]


# -- the driver killed: subprocesses --------------------------------------------------------


def kill_chain(
    b: str,
    tmp_path: Path,
    kills: list[str],
    *,
    partitions: int,
    txns: int,
    per_txn: int,
    max_offsets: int,
    seed: int,
) -> None:
    """Run the copy app repeatedly from one checkpoint: each run dies at a kill point
    ('point@batch') or is SIGKILLed after a random delay ('random'); then a final run
    catches up. The output must hold every committed input record exactly once."""
    rng = random.Random(seed)
    src, dst = unique("src"), unique("dst")
    create_topic(b, src, partitions)
    create_topic(b, dst, partitions)
    expected = transactional_input(b, src, partitions, txns=txns, per_txn=per_txn)
    ck, log = tmp_path / "ck", tmp_path / "driver.log"
    # These outages must stay shorter than transactionTimeoutMs (the default, 60 s, is less
    # than two JVM start-ups on a loaded machine); longer outages are tested below.
    common = {
        "input": src,
        "output": dst,
        "max_offsets": max_offsets,
        "extra": ["--transaction-timeout-ms", "600000"],
    }
    for kill in kills:
        if kill == "random":
            d = DriverProcess(b, ck, log, **common)  # type: ignore[arg-type]
            assert d.wait_for_progress(180), f"no micro-batch completed:\n{d.tail()}"
            time.sleep(rng.uniform(0.0, 2.5))
            d.kill()
        else:
            d = DriverProcess(b, ck, log, kill_at=kill, **common)  # type: ignore[arg-type]
            rc = d.wait(240)
            assert rc == -9, f"driver was not killed at {kill} (exit {rc}):\n{d.tail()}"
    final = DriverProcess(b, ck, log, available_now=True, **common)  # type: ignore[arg-type]
    rc = final.wait(300)
    assert rc == 0, f"final run failed (exit {rc}):\n{final.tail()}"
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)


def test_streaming_exactly_once_survives_driver_kills(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The driver SIGKILLed in the middle of a decided batch's commit loop (some task
    transactions committed, the rest prepared: rolled forward on restart, tasks of the
    replay write nothing), then at a random moment. The slow variant below covers every
    kill point; test_driver_outage_longer_than_the_transaction_timeout kills between the
    decision and the first commit."""
    kill_chain(
        spark_broker.bootstrap,
        tmp_path,
        ["commit-mid-endtxn@1", "random"],
        partitions=3,
        txns=30,
        per_txn=60,
        max_offsets=500,
        seed=int(os.environ.get("ONCELOG_SEED", "1")),
    )


@pytest.mark.slow
@pytest.mark.timeout(1800)  # nine driver runs, each a JVM start: over the suite's 300 s
def test_streaming_exactly_once_survives_many_driver_kills(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Every kill point of a micro-batch's life cycle, plus SIGKILLs at random moments."""
    kills = [
        "commit-before-decision@1",
        "commit-after-decision@2",
        "commit-mid-endtxn@3",
        "commit-after-endtxn@4",
        "task-after-flush",
        "random",
        "random",
        "random",
    ]
    kill_chain(
        spark_broker.bootstrap,
        tmp_path,
        kills,
        partitions=4,
        txns=120,
        per_txn=100,
        max_offsets=1200,
        seed=int(os.environ.get("ONCELOG_SEED", "2")),
    )


@pytest.mark.slow  # over a minute of waiting: make test-slow runs it
def test_driver_outage_longer_than_the_transaction_timeout(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The driver dies between deciding batch 1 and committing it and stays down longer than
    transactionTimeoutMs: the coordinator aborts the prepared transactions. The restart
    must not lose or duplicate anything silently: it fails with a clear error after
    retracting the decision, and the next restart recomputes the batch exactly once."""
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    expected = transactional_input(b, src, 2, txns=20, per_txn=50)
    ck, log = tmp_path / "ck", tmp_path / "driver.log"
    timeout_ms = 12_000
    common: dict[str, Any] = {
        "input": src,
        "output": dst,
        "max_offsets": 300,
        "extra": ["--transaction-timeout-ms", str(timeout_ms)],
    }
    d = DriverProcess(b, ck, log, kill_at="commit-after-decision@1", **common)
    assert d.wait(240) == -9, d.tail()
    assert open_transactions(b, PREFIX + "-"), "batch 1's prepared transactions should be open"
    deadline = time.monotonic() + timeout_ms / 1000 + 20
    while open_transactions(b, PREFIX + "-") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert open_transactions(b, PREFIX + "-") == [], (
        "the coordinator did not time the transactions out"
    )

    d = DriverProcess(b, ck, log, available_now=True, **common)
    rc = d.wait(240)
    assert rc != 0, "the restart must fail loudly"
    text = log.read_text()
    assert "TransactionsTimedOut" in text and "batch 1" in text and "retracted" in text, d.tail(60)
    assert len(read_topic(b, dst)) < len(expected)  # batch 1 is not visible, not even partly

    d = DriverProcess(b, ck, log, available_now=True, **common)
    assert d.wait(300) == 0, d.tail()
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
