"""The exactly-once copy on a Spark standalone cluster (master + one 2-core worker, started
with ``spark-class`` from the pyspark wheel), not ``local[N]``: the driver, the executor
JVM and its Python workers are separate processes, as on a real cluster. The executor is
SIGKILLed while a write task holds an open transaction; Spark's standalone master starts
a new executor, the task is retried there, and the output is still exactly once."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker
from oncelog.spark.hooks import HOOK_ENV
from oncelog.testing import faults
from oncelog.testing.verify import open_transactions, read_topic, stable

from .apps.spark_cluster import (
    SparkProcess,
    ancestors,
    executor_pids,
    run_docs_job,
    spark_env,
    start_standalone,
)
from .apps.spark_common import DriverProcess, create_topic, produce_plain, spark_broker, unique
from .test_spark_lingering import no_hanging
from .test_spark_sink import assert_exactly_once, no_leftovers, transactional_input

# xdist (make test): the Spark tests share one worker, so no two Spark jobs (here four
# JVMs: master, worker, executor, driver) compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark_broker"]  # fixtures

PREFIX = "oncelog-spark"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, SparkProcess, Path]]:
    """docs/spark.md's standalone cluster (a master and a 2-core worker). Its write tasks
    pause at batch 2's flush (partition 0's task, transaction open) until the test kills
    their executor, once: the first task to pause leaves a marker file, which stops any
    later one. Yields the master URL, the cluster (its processes, its log) and the
    marker; the cluster's whole session is SIGKILLed afterwards, also on failure."""
    work = tmp_path_factory.mktemp("cluster")
    marker = work / "paused"
    cluster, url = start_standalone(
        work,
        {
            HOOK_ENV: faults.PAUSE_HOOK,
            faults.PAUSE_AT_ENV: "task-after-flush@2",
            faults.PAUSE_FILE_ENV: str(marker),
        },
    )
    try:
        yield url, cluster, marker
    finally:
        cluster.kill()


def wait_for(what: str, check: Callable[[], object], timeout: float, driver: DriverProcess) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert driver.proc.poll() is None, f"driver exited before {what}: {driver.tail()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s: {driver.tail()}"
        time.sleep(0.2)


@pytest.mark.timeout(600)
def test_an_executor_killed_mid_batch_on_a_standalone_cluster(
    cluster: tuple[str, SparkProcess, Path],
    spark_broker: EmbeddedBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transactional input (a quarter of it aborted) copied in micro-batches of 500
    offsets by a driver whose master is the standalone cluster. Batch 2's write task for
    partition 0 pauses after its flush, its transaction open; the test SIGKILLs the
    executor JVM running it. Spark loses the tasks that executor was running, the master
    launches a new executor and they are retried there as new attempts (new transactional
    ids); the killed attempt's open transaction is aborted by the commit's clean-up. Checked
    with read_committed reads: every committed input record once, nothing open, LSO == HW
    on every output partition, find-hanging reports nothing."""
    url, processes, marker = cluster
    for key, value in spark_env().items():
        monkeypatch.setenv(key, value)  # the driver: loopback, workers on this checkout
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    expected = transactional_input(b, src, 2, txns=24, per_txn=100)
    driver = DriverProcess(
        b,
        tmp_path / "ck",
        tmp_path / "driver.log",
        input=src,
        output=dst,
        max_offsets=500,
        available_now=True,
        extra=["--master", url],
    )
    try:
        wait_for(
            "paused write task of batch 2",
            lambda: marker.exists() and marker.read_text().endswith("\n"),
            300,
            driver,
        )
        (executor,) = executor_pids(processes)
        paused = int(marker.read_text())
        assert executor in ancestors(paused), "the paused task is not the executor's"
        # The paused task (partition 0, attempt 0) holds an open transaction with records.
        ids = open_transactions(b, PREFIX + "-")
        assert any(t.endswith("-0-0") for t in ids), ids
        assert not stable(b, dst)
        os.kill(executor, signal.SIGKILL)
        # The master starts a new executor on the worker, which retries the lost tasks.
        wait_for(
            "new executor",
            lambda: [p for p in executor_pids(processes) if p != executor],
            120,
            driver,
        )
        assert driver.wait(400) == 0, driver.tail()
    finally:
        driver.kill()
    # The worker saw its executor die of the SIGKILL and launched the next one.
    log = processes.log()
    assert re.search(r"Executor app-\S+/0 finished with state EXITED .*exited with code 137", log)
    assert re.search(r"Asked to launch executor app-\S+/1 ", log), log[-3000:]
    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    no_hanging(b)


DOCS_JOB = "<!-- executed as written by tests/integration/test_spark_standalone.py -->"


@pytest.mark.timeout(600)
def test_the_docs_cluster_job_runs_as_written(
    cluster: tuple[str, SparkProcess, Path], spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """docs/spark.md's cluster job, as written, against the cluster its commands started:
    its executor runs on the worker, and the output is the input upper-cased, once."""
    url, processes, _ = cluster
    b = spark_broker.bootstrap
    create_topic(b, "orders", 3)
    create_topic(b, "orders-upper", 1)
    produce_plain(b, "orders", [b"order-%03d" % i for i in range(90)], 3)
    done = run_docs_job(DOCS_JOB, tmp_path, {"KAFKA_BOOTSTRAP": b, "SPARK_MASTER": url})
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"Asked to launch executor app-\S+ for orders-upper", processes.log())
    assert sorted(r.value for r in read_topic(b, "orders-upper")) == [
        b"ORDER-%03d" % i for i in range(90)
    ]
    no_leftovers(b, "orders-upper")
