"""Chaos for exactly-once source connectors (KIP-618, as Kafka's
``connect_distributed_test`` exactly-once system test): three workers with
``exactly.once.source.support=enabled`` run VerifiableSource with 3 tasks while random
workers are cleanly restarted or SIGKILLed; afterwards a read_committed reader (librdkafka's default isolation) finds, per
task, seqnos 0, 1, 2, ... with no gap and no duplicate.

Zombie fencing keeps the old generations out; the transactional task loop
(``oncelog.connect.runtime.exactly_once_source_task``) writes records and offsets atomically.
CI runs two rounds; the
``slow`` variant (``make test-slow``) runs four."""

from __future__ import annotations

import json
import random
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import consume_all
from .workers import WorkerProcess, wait_for, worker_settings

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

TOPIC = "chaos"


def _running(worker: WorkerProcess, name: str, tasks: int) -> bool:
    configured = [t["id"]["task"] for t in worker.get(f"/connectors/{name}/tasks")]
    states = {t["id"]: t["state"] for t in worker.get(f"/connectors/{name}/status")["tasks"]}
    return configured == list(range(tasks)) and all(states.get(t) == "RUNNING" for t in configured)


def _written(bootstrap: str) -> int:
    """Records (and markers) in the topic so far: the sum of its high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-probe"})
    try:
        topic = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC]
        return sum(
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in topic.partitions
        )
    finally:
        consumer.close()


def _chaos(rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="connect-eos-chaos-"))
    broker = EmbeddedBroker(base / "data").start()
    settings = worker_settings(
        broker.bootstrap, "chaos", **{"exactly.once.source.support": "enabled"}
    )
    workers = [WorkerProcess(settings, base / f"worker{i}.log") for i in range(3)]
    try:
        for worker in workers:
            worker.start()
        config = {
            "connector.class": "VerifiableSource",
            "throughput": "100",
            "topic": TOPIC,
            "tasks.max": "3",
        }
        assert workers[0].call("POST", "/connectors", {"name": "v", "config": config})[0] == 201
        wait_for(lambda: _running(workers[0], "v", 3), 90, "3 tasks running")
        for round_ in range(rounds):
            victim = workers[rng.randrange(3)]
            if round_ % 2 == 0:
                assert victim.terminate() == 0
            else:
                victim.kill()
            victim.start(90)
            wait_for(lambda: all(_running(w, "v", 3) for w in workers), 120, f"round {round_}")
            before = _written(broker.bootstrap)
            wait_for(
                lambda before=before: _written(broker.bootstrap) > before + 50,
                60,
                "progress after the round",
            )
        assert workers[0].call("PUT", "/connectors/v/stop")[0] == 204
        wait_for(lambda: workers[0].get("/connectors/v/tasks") == [], 60, "stopped")
        seqnos: dict[int, list[int]] = defaultdict(list)
        for message in consume_all(broker.bootstrap, TOPIC, 10**9, timeout_s=5):
            value = json.loads(message.value())
            seqnos[value["task"]].append(value["seqno"])
        assert sorted(seqnos) == [0, 1, 2]
        for task, seen in sorted(seqnos.items()):
            assert sorted(seen) == list(range(len(seen))), (
                f"task {task}: {len(seen)} records, {len(seen) - len(set(seen))} duplicates, "
                f"gaps {sorted(set(range(max(seen) + 1)) - set(seen))[:10]}"
            )
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()


def test_chaos_two_rounds_exactly_once() -> None:
    _chaos(rounds=2, seed=11)


@pytest.mark.slow
def test_chaos_four_rounds_exactly_once() -> None:
    _chaos(rounds=4, seed=618)
