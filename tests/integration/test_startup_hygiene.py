"""Start-up hygiene: no test library at run time, nothing written outside the data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from oncelog.embedded import READY, parse_ready_line

TEST_LIBRARIES = ("hypothesis", "pytest", "_pytest", "_hypothesis_globals")


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    # pytest's own plugins must not leak in through the environment
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def test_runtime_imports_no_test_library(tmp_path: Path) -> None:
    probe = (
        "import json, sys\n"
        "import oncelog.cli.main, oncelog.broker.server, oncelog.client.admin\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {TEST_LIBRARIES!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == []
    assert list(tmp_path.iterdir()) == []


def test_broker_writes_nothing_outside_its_data_dir(tmp_path: Path) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oncelog.cli.main",
            "broker",
            "--data-dir",
            str(data_dir),
            "--listen",
            "127.0.0.1:0",
        ],
        cwd=workdir,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY), line
        port = next(iter(parse_ready_line(line).values()))
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("hygiene", b"v")
        assert producer.flush(30) == 0
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert list(workdir.iterdir()) == []
    assert (data_dir / "hygiene-0").is_dir()


# What a broker's start must not import (docs/perf-notes/startup.md, "Start-up and scale"): the
# admin CLI's subcommands and what they pull in (the client with its kio schemas, rich,
# confluent-kafka), typer's pydantic coercion, and libraries only some configurations
# use (a config file, client certificates, SCRAM, the metrics listener). Each cost a
# part of every start.
NOT_AT_START = (
    "oncelog.client",
    "oncelog.connect",
    "oncelog.spark",
    "oncelog.cli.common",
    "oncelog.cli.topics",
    "oncelog.cli.demo",
    "rich",
    "confluent_kafka",
    "tenacity",
    "javaproperties",
    "cryptography",
    "scramp",
    "aiohttp",
    "prometheus_client",
    "pydantic",  # typer's parameter coercion; `oncelog broker` lines skip it
)


def test_broker_start_imports_only_what_it_uses(tmp_path: Path) -> None:
    """The broker's own process, started as EmbeddedBroker starts it, up to its ready
    line and one produce; PYTHONPROFILEIMPORTTIME makes it name every module it imports."""
    env = _clean_env() | {"PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oncelog.cli.main",
            "broker",
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "WARNING",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY), line
        port = next(iter(parse_ready_line(line).values()))
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("imports", b"v")
        assert producer.flush(30) == 0
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr[-2000:]
    imported = {
        line.rpartition("|")[2].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "[us]" not in line
    }
    assert {"oncelog.broker.broker", "oncelog.storage.unified_log", "uvloop"} <= imported
    unwanted = sorted(
        m for m in imported if any(m == p or m.startswith(p + ".") for p in NOT_AT_START)
    )
    assert unwanted == []


def test_a_clean_shutdown_of_a_broker_with_many_partitions_logs_no_stall(
    tmp_path: Path,
) -> None:
    """Closing a few hundred partitions holds the loop for a while on SIGTERM; nobody is
    served any more, so the stall watchdog must not report it (a 30-line stack per
    shutdown was noise)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.embedded import EmbeddedBroker

    broker = EmbeddedBroker(
        tmp_path / "data", settings={"oncelog.loop.stall.warn.ms": "50"}
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [NewTopic(f"t{i}", num_partitions=10, replication_factor=1) for i in range(10)]
        for future in admin.create_topics(topics).values():
            future.result(30)
        # Dirty pages in every partition: closing fsyncs them all.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        value = os.urandom(100_000)
        for _ in range(8):
            for i in range(10):
                for p in range(10):
                    producer.produce(f"t{i}", value, partition=p)
            producer.flush(30)
        assert producer.flush(30) == 0
        del producer, admin  # closed before the broker: no librdkafka disconnect noise
    finally:
        broker.stop()
    log = broker.log_path.read_text()
    assert "shutting down" in log, log[-2000:]
    shutdown = log[log.index("shutting down") :]
    assert "event loop held" not in shutdown, shutdown[:4000]
