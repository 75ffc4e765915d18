"""Consumer groups and group-aware exactly-once (KIP-447) with real clients."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_transactions import read_all, txn_producer

APPS = Path(__file__).parent / "apps"
FAST_GROUPS = {
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


def wait_for(predicate, timeout: float, message: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(message)


def lines(paths: list[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.exists():
            out += [line for line in p.read_text().splitlines() if line]
    return out


def test_rebalancing_group_exactly_once_across_joins_leaves_kills_and_restart(
    tmp_path: Path, topic_name: str
) -> None:
    b = EmbeddedBroker(tmp_path / "data", settings=FAST_GROUPS).start()
    members: dict[str, subprocess.Popen[bytes]] = {}
    outputs: list[Path] = []

    def start(name: str) -> None:
        out = tmp_path / f"{name}.out"
        outputs.append(out)
        log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        members[name] = subprocess.Popen(
            [
                sys.executable,
                str(APPS / "group_member.py"),
                b.bootstrap,
                topic_name,
                "grp",
                str(out),
            ],
            stdout=log,
            stderr=log,
        )

    sent = 0

    def wave(n: int) -> None:
        nonlocal sent
        produce(b.bootstrap, topic_name, [(None, b"%d" % i, i % 6) for i in range(sent, sent + n)])
        sent += n
        wait_for(
            lambda: len(lines(outputs)) >= sent,
            60,
            f"only {len(lines(outputs))} of {sent} consumed",
        )

    try:
        create_topic(b.bootstrap, topic_name, 6)
        for name in ("a", "b", "c"):
            start(name)
        wave(3000)
        members["a"].send_signal(signal.SIGTERM)  # clean leave
        assert members["a"].wait(20) == 0
        wave(3000)
        start("d")  # a join
        time.sleep(2)
        wave(3000)
        members["b"].kill()  # SIGKILL: only the session timeout removes it
        members["b"].wait()
        wave(3000)
        b.restart()  # committed offsets survive
        wave(3000)
        got = lines(outputs)
        values = sorted(int(line.split()[2]) for line in got)
        # A member that died (a failed commit raises) hands its records to another.
        dead = {n: p.returncode for n, p in members.items() if n in "cd" and p.poll() is not None}
        logs = {n: (tmp_path / f"{n}.log").read_text()[-2000:] for n in dead}
        assert not dead, f"members died: {dead}; their logs' ends: {logs}"
        twice = sorted(v for v, n in Counter(values).items() if n > 1)[:5]
        assert values == list(range(sent)), (
            f"a record was lost or consumed twice (twice: {twice}, as "
            f"{[line for line in got if int(line.split()[2]) in twice][:10]})"
        )
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "grp"})
        committed = c.committed([TopicPartition(topic_name, p) for p in range(6)], timeout=10)
        c.close()
        assert sum(tp.offset for tp in committed) == sent
    finally:
        for proc in members.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        b.stop()


def test_kafka_python_group(tmp_path: Path, topic_name: str) -> None:

    with EmbeddedBroker(tmp_path / "data", settings=FAST_GROUPS) as broker:
        run_kafka_python_group(broker, topic_name)


def run_kafka_python_group(broker: EmbeddedBroker, topic_name: str) -> None:
    from kafka import KafkaConsumer

    create_topic(broker.bootstrap, topic_name, 4)
    produce(broker.bootstrap, topic_name, [(None, b"%d" % i, i % 4) for i in range(2000)])
    seen: list[bytes] = []
    lock = threading.Lock()

    def member() -> None:
        c = KafkaConsumer(
            topic_name,
            bootstrap_servers=broker.bootstrap,
            group_id="kp-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            consumer_timeout_ms=15000,
        )
        for msg in c:
            with lock:
                seen.append(msg.value)
            c.commit()
        c.close()

    threads = [threading.Thread(target=member) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(int(v) for v in seen) == list(range(2000))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kp-group"})
    committed = c.committed([TopicPartition(topic_name, p) for p in range(4)], timeout=10)
    c.close()
    assert [tp.offset for tp in committed] == [500] * 4


def start_app(bootstrap: str, txn_id: str, log_dir: Path, *extra: str) -> subprocess.Popen[bytes]:
    log = open(log_dir / f"{txn_id}.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        [
            sys.executable,
            str(APPS / "eos_app.py"),
            bootstrap,
            "in",
            "out",
            "eos-group",
            txn_id,
            *extra,
        ],
        stdout=log,
        stderr=log,
    )


def assert_exactly_once_copy(bootstrap: str, n: int, parts: int) -> None:
    msgs = read_all(bootstrap, "out", parts, "read_committed", idle=3.0)
    for p in range(parts):
        got = [m.value() for m in msgs if m.partition() == p]
        assert got == [b"%d" % i for i in range(p, n, parts)], (
            f"partition {p}: duplicates, loss or reordering"
        )


def test_kip447_app_survives_random_kills_and_rebalances(tmp_path: Path) -> None:
    n, parts = 30_000, 6
    b = EmbeddedBroker(tmp_path / "data", settings=FAST_GROUPS).start()
    apps: dict[str, subprocess.Popen[bytes]] = {}
    try:
        create_topic(b.bootstrap, "in", parts)
        create_topic(b.bootstrap, "out", parts)
        produce(b.bootstrap, "in", [(None, b"%d" % i, i % parts) for i in range(n)])
        for i in range(3):
            apps[f"eos-{i}"] = start_app(b.bootstrap, f"eos-{i}", tmp_path, "--txn-sleep", "0.2")
        rng = random.Random(447)
        kills = 0
        next_kill = time.monotonic() + 3
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            for name, proc in list(apps.items()):
                if proc.poll() is not None:
                    apps[name] = start_app(b.bootstrap, name, tmp_path, "--txn-sleep", "0.2")
            if kills < 4 and time.monotonic() >= next_kill:
                victim = rng.choice(sorted(apps))
                apps[victim].kill()  # SIGKILL mid-transaction: the restart fences and aborts it
                apps[victim].wait()
                kills += 1
                time.sleep(rng.uniform(0, 2))
                apps[victim] = start_app(b.bootstrap, victim, tmp_path, "--txn-sleep", "0.2")
                next_kill = time.monotonic() + rng.uniform(2, 5)
            elif (
                kills == 4
                and len(read_all(b.bootstrap, "out", parts, "read_committed", idle=0.5)) >= n
            ):
                break
            time.sleep(0.2)
        assert kills == 4
        time.sleep(2)
        assert_exactly_once_copy(b.bootstrap, n, parts)
    finally:
        for proc in apps.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        b.stop()


def test_zombie_instance_is_fenced_by_generation(tmp_path: Path) -> None:
    n, parts = 6_000, 4
    b = EmbeddedBroker(tmp_path / "data", settings=FAST_GROUPS).start()
    apps: dict[str, subprocess.Popen[bytes]] = {}
    try:
        create_topic(b.bootstrap, "in", parts)
        create_topic(b.bootstrap, "out", parts)
        produce(b.bootstrap, "in", [(None, b"%d" % i, i % parts) for i in range(n // 2)])
        zombie_log = tmp_path / "zombie.log"
        apps["zombie"] = start_app(b.bootstrap, "zombie", tmp_path, "--txn-sleep", "3")
        wait_for(
            lambda: zombie_log.exists() and "IN_TXN" in zombie_log.read_text(),
            30,
            "zombie never entered a transaction",
        )
        apps["zombie"].send_signal(signal.SIGSTOP)  # frozen inside an open transaction
        apps["live"] = start_app(b.bootstrap, "live", tmp_path)
        time.sleep(12)  # past the zombie's session timeout: all partitions move to "live"
        produce(b.bootstrap, "in", [(None, b"%d" % i, i % parts) for i in range(n // 2, n)])
        apps["zombie"].send_signal(
            signal.SIGCONT
        )  # it wakes up and tries to commit its stale transaction
        wait_for(
            lambda: len(read_all(b.bootstrap, "out", parts, "read_committed", idle=0.5)) >= n,
            120,
            "copy did not finish",
        )
        time.sleep(4)
        assert_exactly_once_copy(b.bootstrap, n, parts)
        log = zombie_log.read_text()
        assert any(word in log for word in ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "FENCED")), (
            log[-2000:]
        )
    finally:
        for proc in apps.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
        b.stop()


def test_require_stable_waits_for_pending_transactional_offsets(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(None, b"x", 0) for _ in range(10)])
    group_consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "stable-group",
            "enable.auto.commit": False,
        }
    )
    p = txn_producer(broker.bootstrap, "stable-txn")
    p.begin_transaction()
    p.send_offsets_to_transaction(
        [TopicPartition(topic_name, 0, 7)], group_consumer.consumer_group_metadata(), 10
    )
    result: list[tuple[float, int]] = []
    started = time.monotonic()

    def fetch() -> None:
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "stable-group",
                "isolation.level": "read_committed",
            }
        )
        tp = c.committed([TopicPartition(topic_name, 0)], timeout=30)[0]
        result.append((time.monotonic() - started, tp.offset))
        c.close()

    t = threading.Thread(target=fetch)
    t.start()
    time.sleep(3)
    assert not result, "OffsetFetch(require_stable) returned while offsets were pending"
    p.commit_transaction(10)
    t.join(30)
    assert result and result[0][1] == 7 and result[0][0] >= 3
    group_consumer.close()
    if os.environ.get("ONCELOG_DEBUG"):
        print(result)
