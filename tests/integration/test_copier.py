"""Kafka's transactions system test, on oncelog: transactional copiers with random
aborts while the broker or the copiers are SIGKILLed and restarted.

CI runs 20,000 records; ONCELOG_SLOW=1 (make test-slow) runs the full 100,000.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

SLOW = os.environ.get("ONCELOG_SLOW") == "1"
N = 100_000 if SLOW else 20_000
PARTS = 2
COPIER = str(Path(__file__).parent / "apps" / "copier.py")


class Reader(threading.Thread):
    """A read_committed consumer running concurrently with the copy."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.values: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
        self.stop_flag = threading.Event()

    def run(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "verifier",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        c.assign([TopicPartition(self.topic, p, 0) for p in range(PARTS)])
        while not self.stop_flag.is_set():
            for m in c.consume(1000, 0.2):
                if not m.error():
                    self.values[m.partition()].append(m.value())
        c.close()

    def count(self) -> int:
        return sum(len(v) for v in self.values.values())


def start_copier(bootstrap: str, partition: int, log_dir: Path) -> subprocess.Popen[bytes]:
    log = open(log_dir / f"copier-{partition}.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [
            sys.executable,
            COPIER,
            "--bootstrap",
            bootstrap,
            "--input",
            "input",
            "--output",
            "output",
            "--partition",
            str(partition),
            "--group",
            "copier-group",
        ],
        stdout=log,
        stderr=log,
    )


def copier_log_tails(log_dir: Path, lines: int = 40) -> str:
    return "\n".join(
        f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        for log in sorted(log_dir.glob("copier-*.log"))
    )


def run_copy(tmp_path: Path, *, bounce_broker: bool, bounce_copiers: bool) -> None:
    broker = EmbeddedBroker(
        tmp_path / "data",
        settings={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"},
    ).start()
    copiers: dict[int, subprocess.Popen[bytes]] = {}
    reader = None
    try:
        create_topic(broker.bootstrap, "input", PARTS)
        create_topic(broker.bootstrap, "output", PARTS)
        produce(broker.bootstrap, "input", [(None, b"%d" % i, i % PARTS) for i in range(N)])
        reader = Reader(broker.bootstrap, "output")
        reader.start()
        copiers = {p: start_copier(broker.bootstrap, p, tmp_path) for p in range(PARTS)}
        bounces = 0
        restarts: list[tuple[int, int]] = []  # (partition, exit code) of failed copiers
        deadline = time.monotonic() + (900 if SLOW else 300)
        while time.monotonic() < deadline:
            for p, proc in list(copiers.items()):
                code = proc.poll()
                if code is not None and code != 0:
                    restarts.append((p, code))
                    copiers[p] = start_copier(
                        broker.bootstrap, p, tmp_path
                    )  # a fatal error: restart it
            if all(proc.poll() == 0 for proc in copiers.values()):
                break
            if bounces < 3 and reader.count() > (bounces + 1) * N // 5:
                bounces += 1
                if bounce_broker:
                    broker.kill()
                    time.sleep(0.5)
                    broker.start()
                if bounce_copiers:
                    for p, proc in copiers.items():
                        proc.kill()
                        proc.wait()
                        copiers[p] = start_copier(broker.bootstrap, p, tmp_path)
            time.sleep(0.2)
        assert all(proc.poll() == 0 for proc in copiers.values()), (
            f"copiers did not finish: {reader.count()} of {N} records read, {bounces} bounces, "
            f"restarts (partition, exit code) {restarts}; their logs end with:\n"
            + copier_log_tails(tmp_path)
        )
        assert bounces == 3
        wait_until = time.monotonic() + 30
        while reader.count() < N and time.monotonic() < wait_until:
            time.sleep(0.2)
        time.sleep(1.0)  # catch any extra (duplicate) records
        reader.stop_flag.set()
        reader.join(10)
        final = Reader(broker.bootstrap, "output")
        final.start()
        while final.count() < N and time.monotonic() < wait_until + 30:
            time.sleep(0.2)
        time.sleep(1.0)
        final.stop_flag.set()
        final.join(10)
        for p in range(PARTS):
            expected = [b"%d" % i for i in range(p, N, PARTS)]
            assert final.values[p] == expected, f"output partition {p}: order, duplicates or loss"
            assert reader.values[p] == expected, (
                f"concurrent reader of partition {p} saw something else"
            )
    finally:
        if reader is not None:
            reader.stop_flag.set()
        for proc in copiers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        broker.stop()


@pytest.mark.timeout(1200)
def test_copier_with_broker_sigkills(tmp_path: Path) -> None:
    run_copy(tmp_path, bounce_broker=True, bounce_copiers=False)


@pytest.mark.timeout(1200)
def test_copier_with_copier_sigkills(tmp_path: Path) -> None:
    run_copy(tmp_path, bounce_broker=False, bounce_copiers=True)
