"""docs/testing.md's broker command for librdkafka's own test suite starts a broker as
written (only the port is added, so the test runs beside others), with the settings of
librdkafka's CI template: topics are created on first use with 4 partitions."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from .connect.workers import free_port

ROOT = Path(__file__).parents[2]
MARKER = "<!-- librdkafka broker: started as written -->"


def test_the_librdkafka_suite_broker_starts_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "testing.md").read_text()
    [block] = re.findall(re.escape(MARKER) + r"\n *```sh\n(.*?)\n *```", text, flags=re.S)
    port = free_port()
    command = " ".join(line.strip().rstrip("\\") for line in block.splitlines())
    command = command.replace("/tmp/rdkafka-data", str(tmp_path / "data"))
    command += f" --listen 127.0.0.1:{port}"
    proc = subprocess.Popen(
        ["bash", "-c", f"source .venv/bin/activate && exec {command}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "ready on" not in line:
            line = proc.stdout.readline()
        assert "ready on" in line, line
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("auto-created", b"x")
        assert producer.flush(30) == 0
        topics = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        assert len(topics.topics["auto-created"].partitions) == 4
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
