"""Shared pieces of the Spark integration tests: a session-wide local Spark, a broker per
test module, and client-side helpers (real clients only)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker, readable
from oncelog.testing import faults

EOS_APP = str(Path(__file__).parent / "spark_eos_app.py")
TXN_TIMEOUT_CLEANUP = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """local[2, 4]: two cores, and up to 4 attempts per task (plain local[2] never retries a
    failed task, and the retry tests need Spark's retries)."""
    from oncelog.spark import spark_session

    session = spark_session(
        "oncelog-tests", master="local[2,4]", conf={"spark.sql.shuffle.partitions": "2"}
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(
        tmp_path_factory.mktemp("spark-broker") / "data", settings=TXN_TIMEOUT_CLEANUP
    ).start()
    try:
        yield b
    finally:
        b.stop()


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


@dataclass
class Sent:
    partition: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes | None]] | None


def produce_transactions(
    bootstrap: str,
    topic: str,
    txns: list[tuple[bool, list[Sent]]],
    *,
    txn_id: str | None = None,
) -> None:
    """Each (commit?, records) is one transaction, committed or aborted."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id or unique("gen"),
            "linger.ms": 2,
            "enable.sparse.connections": False,
        }
    )
    p.init_transactions(30)
    for commit, records in txns:
        p.begin_transaction()
        for r in records:
            p.produce(topic, value=r.value, key=r.key, partition=r.partition, headers=r.headers)  # type: ignore[arg-type]
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)


def produce_plain(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=b"k%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def leave_open_transaction(bootstrap: str, topic: str, txn_id: str, values: list[bytes]) -> None:
    """Begin a transaction, write, flush, and drop the producer: the transaction stays open
    (librdkafka's destroy does not abort), like a task attempt that died."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 2,
            "enable.sparse.connections": False,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0
    del p


class DriverProcess:
    """tests/integration/apps/spark_eos_app.py in a session of its own."""

    def __init__(
        self,
        bootstrap: str,
        checkpoint: Path,
        log: Path,
        *,
        input: str,
        output: str,
        max_offsets: int,
        available_now: bool = False,
        kill_at: str | None = None,
        extra: list[str] | None = None,
    ) -> None:
        env = {k: v for k, v in os.environ.items() if k != faults.KILL_AT_ENV}
        env["PYSPARK_PYTHON"] = sys.executable
        if kill_at:
            env[faults.KILL_AT_ENV] = kill_at
        cmd = [
            sys.executable,
            EOS_APP,
            "--bootstrap",
            bootstrap,
            "--checkpoint",
            str(checkpoint),
            "--input",
            input,
            "--output",
            output,
            "--max-offsets",
            str(max_offsets),
        ]
        if available_now:
            cmd.append("--available-now")
        cmd += extra or []
        self.log_path = log
        self.log = open(log, "a")  # noqa: SIM115 - closed by wait()/kill()
        self.log.write(f"\n==== {' '.join(cmd)} (kill_at={kill_at})\n")
        self.log.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,
            env=env,
            cwd=str(Path(__file__).parents[3]),
        )
        self.batches: list[str] = []

    def wait_for_progress(self, timeout: float) -> bool:
        """Block until the first 'progress' line (a micro-batch completed)."""

        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = readable(self.proc.stdout, 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    return False
                self.batches.append(line.strip())
                if line.startswith("progress"):
                    return True
        return False

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        finally:
            self.log.close()

    def kill(self) -> None:
        faults.kill_session(self.proc.pid)
        self.proc.wait()
        self.log.close()

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-n:])
