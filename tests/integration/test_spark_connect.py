"""The data source through Spark Connect: a client (``SparkSession.builder.remote``, the
``oncelog[spark-connect]`` extra) registers it with a Spark Connect server (local[2]) and
runs a batch read and the exactly-once streaming copy there.

Under Spark Connect the client is not the driver: the server is. The client sends plans;
the server's JVM plans and runs the queries and its Python workers run the data source
(reader, writer, and the sink's commit). So a streaming query outlives its client: once
started it runs on until stopped, until its session expires
(``spark.connect.session.manager.defaultSessionTimeout``, 60 minutes) or until a new run
of the same checkpoint replaces it (``spark.sql.streaming.stopActiveRunOnRestart``, on by
default). Killing the client is therefore no driver crash, and the test shows it: the
query goes on committing batches without any client. The crash that exercises the sink's
recovery is the server's, the driver's, so the test SIGKILLs the server's whole session
mid-batch (a kill point: a write task flushed, its transaction open), starts a new server
and restarts the query from the same checkpoint. It also kills that restarted client and
restarts it once more, on the same server, which stops the still-running server-side run
before the new one starts (both runs must never write at once)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import open_transactions, read_topic, stable

from .apps.spark_cluster import ConnectClient, run_docs_job, start_connect_server
from .apps.spark_common import create_topic, spark_broker, unique
from .test_spark_lingering import no_hanging
from .test_spark_sink import assert_exactly_once, no_leftovers, transactional_input

# xdist (make test): the Spark tests share one worker, so no two Spark JVMs compete for
# the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark_broker"]  # fixtures

PREFIX = "oncelog-spark"


@pytest.mark.slow  # two Connect servers, three clients: 98-215 s on the 2 shared cores
@pytest.mark.timeout(900)
def test_spark_connect_batch_read_and_copy_survive_client_and_server_kills(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b, src, dst = spark_broker.bootstrap, unique("src"), unique("dst")
    create_topic(b, src, 2)
    create_topic(b, dst, 2)
    # 40 transactions of 100 records, every fourth aborted: 3000 committed in 4000 records
    # (+ 40 markers), about 14 micro-batches of 300 offsets.
    expected = transactional_input(b, src, 2, txns=40, per_txn=100)
    ck, log = tmp_path / "ck", tmp_path / "clients.log"
    copy = ["--checkpoint", str(ck), "--input", src, "--output", dst, "--max-offsets", "300"]

    server, url = start_connect_server(tmp_path / "server-1", kill_at="task-after-flush@8")
    client = None
    try:
        client = ConnectClient(url, b, log, "--count", src, *copy)
        lines = client.read_until("progress batch=1", 300)
        # The batch read counts committed records only (read_committed).
        assert lines[0] == f"count {src} {len(expected)}", lines
        started = next(line for line in lines if line.startswith("started "))
        query_id = started.split()[1]
        client.kill()
        at_client_death = len(read_topic(b, dst))
        # Without a client the server's query goes on, to batch 8's kill point, which
        # SIGKILLs the server (the driver) with batch 8's task transaction open.
        assert server.proc.wait(240) == -9, server.tail()
        assert len(read_topic(b, dst)) > at_client_death, "no batch committed without a client"
        assert f"{PREFIX}-{query_id}-0-0" in open_transactions(b, PREFIX + "-")
        assert not stable(b, dst)
    finally:
        if client is not None:
            client.kill()
        server.kill()

    server, url = start_connect_server(tmp_path / "server-2")
    client = None
    try:
        # A restarted client resumes the query from the checkpoint on the new server ...
        client = ConnectClient(url, b, log, *copy)
        lines = client.read_until("progress batch=", 300)
        assert lines[0].startswith(f"started {query_id} "), lines
        client.kill()
        # ... and once more, with Trigger.AvailableNow, replacing the run it left behind.
        client = ConnectClient(url, b, log, *copy, "--available-now")
        assert client.wait(300) == 0, client.tail()
        assert client.lines[0].startswith(f"started {query_id} "), client.lines
        assert re.search(
            rf"Stopping existing streaming query \[id={query_id}, runId=\S+\], as a new run "
            "is being started",
            server.log(),
        ), server.tail()
    finally:
        if client is not None:
            client.kill()
        server.kill()

    assert_exactly_once(b, dst, expected)
    no_leftovers(b, dst)
    no_hanging(b)


DOCS_CLIENT = "<!-- executed as written by tests/integration/test_spark_connect.py -->"


@pytest.mark.timeout(600)
def test_the_docs_connect_server_and_client_run_as_written(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """docs/spark.md's server command and client snippet, as written: the client counts
    the committed records of ``orders`` (transactions, a quarter aborted) and copies them
    exactly once into ``orders-copy``; the checkpoint is the server's (relative to its
    working directory)."""
    b = spark_broker.bootstrap
    create_topic(b, "orders", 3)
    create_topic(b, "orders-copy", 3)
    expected = transactional_input(b, "orders", 3, txns=8, per_txn=30)
    server, url = start_connect_server(tmp_path / "server")
    client = tmp_path / "client"
    client.mkdir()
    try:
        done = run_docs_job(DOCS_CLIENT, client, {"KAFKA_BOOTSTRAP": b, "SPARK_REMOTE": url})
    finally:
        server.kill()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [f"orders: {len(expected)} committed records"]
    assert_exactly_once(b, "orders-copy", expected)
    no_leftovers(b, "orders-copy")
    assert (tmp_path / "server" / "checkpoints" / "orders-copy" / "commits" / "0").exists()
