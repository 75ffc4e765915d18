"""Spark closes a Python worker that idled for a minute (PythonWorkerFactory); over the Unix
domain sockets spark_session() sets up, that must end the worker without a traceback on
the application's stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

APP = textwrap.dedent(
    """
    import time
    from oncelog.spark import spark_session
    spark = spark_session("idle-workers", master="local[2]")
    sc = spark.sparkContext
    print(sc.parallelize(range(8), 4).map(lambda x: x * 2).sum(), flush=True)
    time.sleep(75)  # Spark closes workers idle for more than a minute
    print(sc.parallelize(range(8), 4).map(lambda x: x * 2).sum(), flush=True)
    spark.stop()
    """
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_closed_after_idling_leave_no_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    out = subprocess.run(
        [sys.executable, "-c", APP], capture_output=True, text=True, timeout=240, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # (the JVM's start-up warnings share stdout)
    assert [line for line in out.stdout.splitlines() if line.isdigit()] == ["56", "56"]
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr[-3000:]
