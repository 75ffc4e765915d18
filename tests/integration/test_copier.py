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
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

SLOW = os.environ.get("ONCELOG_SLOW") == "1"
N = 100_000 if SLOW else 20_000
PARTS = 2
COPIER = str(Path(__file__).parent / "apps" / "copier.py")
COPIER_TV2 = str(Path(__file__).parent / "apps" / "copier_tv2.py")  # transaction version 2


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


def start_copier(
    bootstrap: str, partition: int, log_dir: Path, script: str = COPIER
) -> subprocess.Popen[bytes]:
    log = open(log_dir / f"copier-{partition}.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [
            sys.executable,
            script,
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


def run_copy(
    tmp_path: Path,
    *,
    bounce_broker: bool,
    bounce_copiers: bool,
    script: str = COPIER,
    verify: Callable[[EmbeddedBroker], None] | None = None,
) -> None:
    """``verify`` runs last, with the broker still up."""
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
        copiers = {p: start_copier(broker.bootstrap, p, tmp_path, script) for p in range(PARTS)}
        bounces = 0
        restarts: list[tuple[int, int]] = []  # (partition, exit code) of failed copiers
        deadline = time.monotonic() + (900 if SLOW else 300)
        while time.monotonic() < deadline:
            for p, proc in list(copiers.items()):
                code = proc.poll()
                if code is not None and code != 0:
                    restarts.append((p, code))
                    copiers[p] = start_copier(
                        broker.bootstrap, p, tmp_path, script
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
                        copiers[p] = start_copier(broker.bootstrap, p, tmp_path, script)
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
        if verify is not None:
            verify(broker)
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


def logged_epochs(log: Path) -> tuple[tuple[int, int], int, int, int, bool]:
    """Reads a TV2 copier's log: checks that every EndTxn returned the epoch + 1 and every
    restart (InitProducerId) got a higher one; returns the last (producer id, epoch), the
    numbers of starts, commits and aborts, and whether the last line is a start."""
    current: tuple[int, int] | None = None
    inits = commits = aborts = 0
    last_is_init = False
    for line in log.read_text().splitlines():
        words = line.split()
        last_is_init = words[:1] == ["init"] or (last_is_init and words[:1] != ["end"])
        if words[:1] == ["init"]:
            pid, epoch = int(words[1]), int(words[2])
            if current is not None:
                assert pid == current[0] and epoch > current[1], (line, current)
            current, inits = (pid, epoch), inits + 1
        elif words[:1] == ["end"]:
            before = (int(words[2]), int(words[3]))
            after = (int(words[5]), int(words[6]))
            assert before == current and after == (before[0], before[1] + 1), line
            current = after
            commits += words[1] == "commit"
            aborts += words[1] == "abort"
    assert current is not None, f"{log.name}: no init"
    return current, inits, commits, aborts, last_is_init


def check_tv2_epochs(tmp_path: Path, broker: EmbeddedBroker, *, min_starts: int) -> None:
    """TV2 was really used: the logs show an epoch bump per EndTxn, and the coordinator and
    the output partitions' producer state (the markers carry the bumped epoch) hold the last
    epoch logged."""
    with TxnAdmin(ClientConfig(broker.bootstrap)) as admin:
        for p in range(PARTS):
            log = tmp_path / f"copier-{p}.log"
            last, inits, commits, aborts, last_is_init = logged_epochs(log)
            assert inits >= min_starts, f"copier {p}: {inits} starts"
            # Each restart follows a SIGKILL, which may land between a commit and its log
            # line: that commit happened (the data checks above saw it) but is not counted.
            assert commits + (inits - 1) >= N // PARTS // 500 and aborts > 0, (commits, aborts)
            state = admin.describe_txn(f"copier-tv2-{p}")
            assert (state.producer_id, state.producer_epoch) == last
            producers = admin.describe_producers("output", p)
            if last_is_init:
                # The last restart came after the copy was done (a kill landed late): its
                # InitProducerId bumped the epoch and nothing was written with it since.
                assert state.transaction_state in ("Empty", "CompleteCommit", "CompleteAbort")
                assert [x.producer_id for x in producers] == [last[0]]
                assert all(x.producer_epoch <= last[1] for x in producers)
                continue
            assert state.transaction_state in ("CompleteCommit", "CompleteAbort")
            assert [(x.producer_id, x.producer_epoch) for x in producers] == [last]


@pytest.mark.timeout(1200)
def test_tv2_copier_with_copier_sigkills(tmp_path: Path) -> None:
    run_copy(
        tmp_path,
        bounce_broker=False,
        bounce_copiers=True,
        script=COPIER_TV2,
        # 3 SIGKILLs, though one may land before a restarted copier printed its init
        verify=lambda broker: check_tv2_epochs(tmp_path, broker, min_starts=2),
    )


@pytest.mark.timeout(1200)
def test_tv2_copier_with_broker_sigkills(tmp_path: Path) -> None:
    run_copy(
        tmp_path,
        bounce_broker=True,
        bounce_copiers=False,
        script=COPIER_TV2,
        # The partitions' producer state too: a restarted broker keeps a producer whose
        # last record is a TV2 marker (the epoch bump emptied its batch cache).
        verify=lambda broker: check_tv2_epochs(tmp_path, broker, min_starts=1),
    )
