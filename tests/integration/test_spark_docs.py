"""The Spark snippets of README.md and docs/spark.md, executed exactly as written (each
block after the marker comment), as a new user would run them: ``python job.py`` in a
fresh process, with PYSPARK_PYTHON set as the README says. And the one clear error when
the workers' interpreter cannot import oncelog."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import read_topic, stable

from .apps.spark_common import create_topic, produce_plain, spark_broker

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark_broker"]  # fixtures

ROOT = Path(__file__).parents[2]
MARKER = "<!-- executed as written by tests/integration/test_spark_docs.py -->"


def snippets(doc: Path) -> list[str]:
    text = doc.read_text()
    found = re.findall(re.escape(MARKER) + r"\n```python\n(.*?)\n```", text, flags=re.S)
    assert found, f"no tested snippet in {doc}"
    return found


def run_job(
    code: str, cwd: Path, bootstrap: str, worker_python: str
) -> subprocess.CompletedProcess[str]:
    job = cwd / "job.py"
    job.write_text(code + "\n")
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "PYSPARK_PYTHON": worker_python}
    return subprocess.run(
        [sys.executable, str(job)], cwd=cwd, env=env, capture_output=True, text=True, timeout=400
    )


@pytest.mark.timeout(900)
def test_readme_snippet_runs_as_written(spark_broker: EmbeddedBroker, tmp_path: Path) -> None:
    """orders (3 partitions) copied into orders-copy (1 partition): the README drops the
    source's partition column, so this works."""
    (code,) = snippets(ROOT / "README.md")
    b = spark_broker.bootstrap
    create_topic(b, "orders", 3)
    create_topic(b, "orders-copy", 1)
    values = [b"order-%03d" % i for i in range(90)]
    produce_plain(b, "orders", values, 3)
    done = run_job(code, tmp_path, b, sys.executable)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(r.value for r in read_topic(b, "orders-copy")) == values
    assert stable(b, "orders-copy")
    # Quiet: the write tasks' expected fallback from KIP-939 two-phase commit logs at DEBUG.
    assert "twoPhaseCommit" not in done.stderr, done.stderr[-3000:]


@pytest.mark.timeout(600)
def test_docs_snippet_runs_as_written(spark_broker: EmbeddedBroker, tmp_path: Path) -> None:
    (code,) = snippets(ROOT / "docs" / "spark.md")
    b = spark_broker.bootstrap
    create_topic(b, "orders-upper", 1)
    if "orders" not in _topics(b):
        create_topic(b, "orders", 3)
        produce_plain(b, "orders", [b"order-%03d" % i for i in range(90)], 3)
    done = run_job(code, tmp_path, b, sys.executable)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(r.value for r in read_topic(b, "orders-upper")) == [
        b"ORDER-%03d" % i for i in range(90)
    ]


@pytest.mark.timeout(600)
def test_register_names_the_worker_python_problem(
    spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The README job run without PYSPARK_PYTHON on a machine whose python3 lacks oncelog:
    one WorkerPythonError line naming the interpreter and PYSPARK_PYTHON, nothing else."""
    (code,) = snippets(ROOT / "README.md")
    done = run_job(code, tmp_path, spark_broker.bootstrap, "/usr/bin/python3")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "WorkerPythonError" in line]
    assert errors, done.stderr[-3000:]
    line = errors[-1]
    assert line.startswith("oncelog.spark.WorkerPythonError: Spark's Python workers"), line
    assert "/usr/bin/python3" in line and f"PYSPARK_PYTHON={sys.executable}" in line, line
    assert "spark_session()" in line


def _topics(bootstrap: str) -> set[str]:
    from oncelog.client.admin import Admin
    from oncelog.client.config import ClientConfig

    with Admin(ClientConfig(bootstrap)) as admin:
        return set(admin.topics())
