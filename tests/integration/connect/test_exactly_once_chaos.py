"""Zombie chaos for exactly-once source connectors (KIP-618, after Kafka's
``connect_distributed_test`` exactly-once system test, made harder).

Three workers with ``exactly.once.source.support=enabled`` run a striped source: six
numbered streams, task ``i`` of ``n`` owning the streams ``s % n == i``, so every change
of the task count moves streams between tasks. In each round:

1. the follower running the highest task is SIGSTOPped;
2. the task count changes at once (3 → 1 → 3 → 2); the group gives up on the frozen
   worker, and the new generation starts on the other two;
3. it is resumed: its old tasks are zombies that still believe they own their streams,
   and write them from where they were frozen;
4. another worker is SIGKILLed and restarted.

Afterwards, read with read_committed to the last stable offsets, every stream holds
seqnos 0, 1, 2, … with no gap and no duplicate, and no transaction is left open.

Only generational fencing keeps the zombies out: the leader fences every producer of the
previous generation before the new one starts. Run with
``ONCELOG_DEBUG_SKIP_ZOMBIE_FENCING=1`` (the leader skips fencing) and the zombies'
duplicates show up. CI runs three rounds per protocol; ``make test-slow`` runs six.
"""

from __future__ import annotations

import json
import random
import signal
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from oncelog.embedded import EmbeddedBroker

from .eos_connectors import PREFIX
from .workers import WorkerProcess, leader_and_followers, wait_for, worker_settings

# xdist (make test): timing-sensitive (session timeouts under SIGSTOP), so never run
# alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

TOPIC = "chaos"
STREAMS = 6


def _worker_id(worker: WorkerProcess) -> str:
    return worker.url.removeprefix("http://")


def _owners(front: WorkerProcess, tasks: int) -> dict[int, str] | None:
    """Task → worker id when exactly ``tasks`` tasks are configured and all RUNNING."""
    configured = [t["id"]["task"] for t in front.get("/connectors/v/tasks")]
    if configured != list(range(tasks)):
        return None
    status = front.get("/connectors/v/status")["tasks"]
    if sorted(t["id"] for t in status) != configured or any(
        t["state"] != "RUNNING" for t in status
    ):
        return None
    return {t["id"]: t["worker_id"] for t in status}


def _running_on(front: WorkerProcess, tasks: int, live: list[WorkerProcess]) -> bool:
    owners = _owners(front, tasks)
    return owners is not None and set(owners.values()) <= {_worker_id(w) for w in live}


def _ends(bootstrap: str) -> tuple[dict[int, int], dict[int, int]]:
    """Per partition: (high watermark, last stable offset)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    out = []
    for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        futures = admin.list_offsets(
            {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in partitions},
            isolation_level=isolation,
            request_timeout=10,
        )
        out.append({tp.partition: f.result().offset for tp, f in futures.items()})
    return out[0], out[1]


def _written(bootstrap: str) -> int:
    return sum(_ends(bootstrap)[0].values())


def _progress(bootstrap: str, what: str) -> None:
    before = _written(bootstrap)
    wait_for(lambda: _written(bootstrap) > before + 30, 60, f"progress {what}")


def _read_committed(bootstrap: str, ends: dict[int, int]) -> list[dict[str, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    values: list[dict[str, int]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            positions = consumer.position([TopicPartition(TOPIC, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return values
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(json.loads(message.value()))
        raise AssertionError("the read_committed read stalled")
    finally:
        consumer.close()


def _round(
    bootstrap: str,
    workers: list[WorkerProcess],
    config: dict[str, str],
    tasks: int,
    count: int,
    rng: random.Random,
    round_: int,
) -> int:
    """One round, from ``tasks`` to ``count`` tasks; 1 when the frozen worker ran a task
    the new generation does not have (a zombie that only the leader's fencing stops)."""
    owners = wait_for(lambda: _owners(workers[0], tasks), 90, "tasks running")
    leader, followers = leader_and_followers(workers)
    # Freeze a follower (the leader must stay up to write the new generation), the one
    # with the highest task: the task that a smaller generation drops.
    hosted = {w: max((t for t, o in owners.items() if o == _worker_id(w)), default=-1)
              for w in followers}  # fmt: skip
    frozen = max(followers, key=lambda w: hosted[w])
    live = [w for w in workers if w is not frozen]
    assert frozen.proc is not None
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        # The new generation is written at once, while the frozen worker's tasks still
        # run there as far as it knows.
        config["tasks.max"] = str(count)
        status, body = leader.call("PUT", "/connectors/v/config", config, retry_rebalance_s=60)
        assert status == 200, (status, body)
        wait_for(lambda: _running_on(leader, count, live), 90, f"round {round_}: {count} tasks")
        _progress(bootstrap, f"in round {round_} with a worker frozen")
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: all(_owners(w, count) for w in workers), 90, f"round {round_}: rejoined")
    victim = rng.choice(live)
    victim.kill()
    victim.start(90)
    wait_for(lambda: all(_owners(w, count) for w in workers), 120, f"round {round_}: restart")
    _progress(bootstrap, f"after round {round_}")
    return int(hosted[frozen] >= count)


def _chaos(counts: list[int], protocol: str, seed: int) -> None:
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="connect-eos-chaos-"))
    broker = EmbeddedBroker(base / "data").start()
    settings = worker_settings(
        broker.bootstrap,
        "chaos",
        **{"exactly.once.source.support": "enabled", "connect.protocol": protocol},
    )
    workers = [WorkerProcess(settings, base / f"worker{i}.log") for i in range(3)]
    try:
        for worker in workers:
            worker.start()
        config = {
            "connector.class": PREFIX + "StripedSourceConnector",
            "topic": TOPIC,
            "streams": str(STREAMS),
            "polls.per.second": "20",
            "tasks.max": "3",
        }
        assert workers[0].call("POST", "/connectors", {"name": "v", "config": config})[0] == 201
        wait_for(lambda: _owners(workers[0], 3), 90, "3 tasks running")
        _progress(broker.bootstrap, "at the start")
        tasks, zombies = 3, 0
        for round_, count in enumerate(counts):
            zombies += _round(broker.bootstrap, workers, config, tasks, count, rng, round_)
            tasks = count
        # At least one round froze a task that the new generation no longer has: a zombie
        # only generational fencing can stop.
        assert zombies > 0
        assert workers[0].call("PUT", "/connectors/v/stop")[0] == 204
        wait_for(lambda: workers[0].get("/connectors/v/tasks") == [], 60, "stopped")
        # Nothing lingers: the last stable offsets reach the high watermarks.
        high, stable = wait_for(
            lambda: (ends := _ends(broker.bootstrap))[0] == ends[1] and ends, 60, "LSO == HW"
        )
        seqnos: dict[int, list[int]] = defaultdict(list)
        for value in _read_committed(broker.bootstrap, stable):
            seqnos[value["stream"]].append(value["seqno"])
        assert sorted(seqnos) == list(range(STREAMS))
        for stream, seen in sorted(seqnos.items()):
            assert sorted(seen) == list(range(len(seen))), (
                f"stream {stream}: {len(seen)} records, {len(seen) - len(set(seen))} "
                f"duplicates, gaps {sorted(set(range(max(seen) + 1)) - set(seen))[:10]}"
            )
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()


@pytest.mark.parametrize("protocol", ["sessioned", "eager"])
def test_zombie_chaos_exactly_once(protocol: str) -> None:
    _chaos([1, 3, 2], protocol, seed=11)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["sessioned", "eager"])
def test_zombie_chaos_six_rounds_exactly_once(protocol: str) -> None:
    _chaos([1, 3, 2, 3, 1, 2], protocol, seed=618)
