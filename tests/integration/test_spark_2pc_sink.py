"""The Spark sink's write tasks with two-phase-commit transactions (KIP-939) on a real
local Spark and a real broker: with ``transaction.two.phase.commit.enable=true`` the tasks
open 2PC transactions (seen from the broker: DescribeTransactions reports the 2PC timeout,
Integer.MAX_VALUE, for every task transactional id) and the output is exactly-once, also
across driver kills between deciding and committing a batch and right after a task
prepared; without it, ``auto`` falls back to librdkafka's transactions, and ``true`` fails
the write with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin, is_two_phase
from oncelog.embedded import EmbeddedBroker
from oncelog.spark.lifecycle import checkpoint_query_id

from .apps.spark_common import (
    TXN_TIMEOUT_CLEANUP,
    DriverProcess,
    create_topic,
    spark,
    spark_broker,
    unique,
)
from .test_spark_sink import (
    PREFIX,
    assert_exactly_once,
    batch_round_trip,
    no_leftovers,
    run_stream,
    transactional_input,
)
from .test_txn_2pc_wire import NO_TIMEOUT, TWO_PC

pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures


@pytest.fixture(scope="module")
def tpc_spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(
        tmp_path_factory.mktemp("spark-2pc-broker") / "data",
        settings={**TWO_PC, **TXN_TIMEOUT_CLEANUP},
    ).start()
    try:
        yield b
    finally:
        b.stop()


def task_transactions(bootstrap: str, query_id: str) -> dict[str, Any]:
    """DescribeTransactions of every transactional id the query's write tasks used."""
    with TxnAdmin(ClientConfig(bootstrap)) as admin:
        ids = [
            t.transactional_id
            for t in admin.list_transactions()
            if t.transactional_id.startswith(f"{PREFIX}-{query_id}-")
        ]
        return admin.describe_many(ids)


def timeout_ms(state: Any) -> int:
    return int(state.transaction_timeout.total_seconds() * 1000)


def copy_stream(
    spark: Any, bootstrap: str, src: str, dst: str, checkpoint: Path, **sink: str
) -> Any:
    """An availableNow copy in micro-batches of at most 400 offsets."""
    return run_stream(
        spark,
        bootstrap,
        src,
        checkpoint,
        {"topic": dst, **sink},
        source_options={"maxOffsetsPerTrigger": "400"},
    )


def test_streaming_tasks_open_two_phase_commit_transactions(
    spark: Any, tpc_spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = tpc_spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 3)
    create_topic(b, dst, 3)
    expected = transactional_input(b, src, 3, txns=16, per_txn=80)
    q = copy_stream(spark, b, src, dst, tmp_path / "ck")  # exactlyOnce.twoPhaseCommit=auto
    assert q.lastProgress is not None and q.lastProgress["batchId"] >= 2  # several batches
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    states = task_transactions(b, q.id)
    # One transactional id per write task (partition, attempt), reused by every micro-batch:
    # each is a two-phase-commit transaction the driver committed.
    assert len(states) >= 2, sorted(states)
    for tid, state in states.items():
        assert is_two_phase(state) and timeout_ms(state) == NO_TIMEOUT, (tid, state)
        assert state.transaction_state == "CompleteCommit", (tid, state)


def test_a_batch_job_with_two_phase_commit_tasks_round_trips_every_column(
    spark: Any, tpc_spark_broker: EmbeddedBroker
) -> None:
    """Keys, string values, the topic and partition columns and headers, through the 2PC
    producer's rows (the job's tasks are 2PC transactions, seen from the broker)."""
    b = tpc_spark_broker.bootstrap
    with TxnAdmin(ClientConfig(b)) as admin:
        before = {t.transactional_id for t in admin.list_transactions()}
    batch_round_trip(spark, b)
    with TxnAdmin(ClientConfig(b)) as admin:
        job = [
            t.transactional_id
            for t in admin.list_transactions()
            if t.transactional_id.startswith(f"{PREFIX}-job-") and t.transactional_id not in before
        ]
        states = admin.describe_many(job)
    assert len(states) >= 2, sorted(states)  # repartition(4): up to 4 tasks
    assert all(
        is_two_phase(s) and s.transaction_state == "CompleteCommit" for s in states.values()
    ), states


def test_without_two_phase_commit_on_the_broker_auto_falls_back(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    expected = transactional_input(b, src, 2, txns=8, per_txn=60)
    q = copy_stream(spark, b, src, dst, tmp_path / "ck", transactionTimeoutMs="45000")
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    states = task_transactions(b, q.id)
    assert len(states) >= 1, sorted(states)
    for tid, state in states.items():
        # librdkafka's transactions: the sink's transactionTimeoutMs, EndTxn by the driver.
        assert not is_two_phase(state) and timeout_ms(state) == 45_000, (tid, state)
        assert state.transaction_state == "CompleteCommit", (tid, state)


def test_two_phase_commit_required_but_refused_fails_the_write(
    spark: Any, spark_broker: EmbeddedBroker
) -> None:
    b, dst = spark_broker.bootstrap, unique("dst")
    create_topic(b, dst, 1)
    df = spark.createDataFrame([("v1",), ("v2",)], "value string").coalesce(1)
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps the task's error
        (
            df.write.format("oncelog")
            .option("kafka.bootstrap.servers", b)
            .option("topic", dst)
            .option("exactlyOnce.twoPhaseCommit", "true")
            .mode("append")
            .save()
        )
    text = str(info.value)
    assert "exactlyOnce.twoPhaseCommit=true" in text, text
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in text, text
    with TxnAdmin(ClientConfig(b)) as admin:
        assert [t for t in admin.list_transactions() if t.state == "Ongoing"] == []


def test_two_phase_commit_survives_driver_kills(
    tpc_spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The driver SIGKILLed after deciding batch 1 (its prepared 2PC transactions are rolled
    forward by the restart: keepPreparedTxn + EndTxn, the replay's tasks write nothing),
    then right after a task of batch 2 prepared (a leftover 2PC transaction, which never
    times out: the restart must abort it)."""
    b, src, dst = tpc_spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 3)
    create_topic(b, dst, 3)
    expected = transactional_input(b, src, 3, txns=20, per_txn=60)
    ck, log = tmp_path / "ck", tmp_path / "driver.log"
    common: dict[str, Any] = {
        "input": src,
        "output": dst,
        "max_offsets": 300,
        "extra": ["--sink-option", "exactlyOnce.twoPhaseCommit=true"],
    }
    for kill in ("commit-after-decision@1", "task-after-flush@2"):
        d = DriverProcess(b, ck, log, kill_at=kill, **common)
        rc = d.wait(240)
        assert rc == -9, f"driver was not killed at {kill} (exit {rc}):\n{d.tail()}"
        query_id = checkpoint_query_id(str(ck))
        assert query_id is not None
        open_ids = {
            tid: s
            for tid, s in task_transactions(b, query_id).items()
            if s.transaction_state == "Ongoing"
        }
        assert open_ids, f"nothing left prepared after the kill at {kill}"
        assert all(is_two_phase(s) for s in open_ids.values()), open_ids
    final = DriverProcess(b, ck, log, available_now=True, **common)
    rc = final.wait(300)
    assert rc == 0, f"final run failed (exit {rc}):\n{final.tail()}"
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    states = task_transactions(b, query_id)
    assert states and all(is_two_phase(s) for s in states.values()), states
