"""KIP-875 offset changes under exactly-once support (KIP-618), as Kafka's
``DistributedHerder.modifyConnectorOffsets`` and ``Worker.modifySourceConnectorOffsets``
make them: a round of zombie fencing first, then one transaction into the offsets topic
the connector's tasks read (here a separate one, copied to the global topic).

A follower running some of the connector's tasks is SIGSTOPped before the connector is
stopped and its offsets reset. When it wakes up, its tasks are zombies that still try to
commit offsets; fenced, they cannot undo the reset. Run with
``ONCELOG_DEBUG_SKIP_ZOMBIE_FENCING=1`` (the leader skips its fencing) and the zombies'
offsets land after the reset, and the test fails.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import read_to_end
from .workers import WorkerProcess, leader_and_followers, wait_for, worker_settings

pytestmark = pytest.mark.xdist_group("timing")

GROUP = "eos875"
NAME = "z"
OUT = "z-out"
OWN_TOPIC = "z-offsets"


def _offsets(worker: WorkerProcess) -> dict[int, int]:
    status, body = worker.call("GET", f"/connectors/{NAME}/offsets")
    assert status == 200, (status, body)
    return {o["partition"]["id"]: o["offset"]["seqno"] for o in body["offsets"]}


def _running(worker: WorkerProcess, tasks: int) -> dict[int, str] | None:
    status = worker.get(f"/connectors/{NAME}/status")["tasks"]
    if len(status) != tasks or any(t["state"] != "RUNNING" for t in status):
        return None
    return {t["id"]: t["worker_id"] for t in status}


def _own_topic_tail(bootstrap: str) -> dict[int, int | None]:
    """Per task, the last offset record in the connector's own topic (None: a tombstone),
    read_committed."""
    out: dict[int, int | None] = {}
    for record in read_to_end(bootstrap, OWN_TOPIC):
        connector, partition = json.loads(record.key())
        if connector == NAME:
            value = record.value()
            out[partition["id"]] = None if value is None else json.loads(value)["seqno"]
    return out


def test_reset_and_alter_under_exactly_once_fence_a_frozen_zombie(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="connect-eos-875-"))
    broker = EmbeddedBroker(base / "data").start()
    workers = [
        WorkerProcess(
            worker_settings(broker.bootstrap, GROUP, **{"exactly.once.source.support": "enabled"}),
            tmp_path / f"w{i}.log",
        )
        for i in range(2)
    ]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(OUT, 1, 1)])[OUT].result(15)
        for worker in workers:
            worker.start()
        leader, (follower,) = leader_and_followers(workers)
        config = {
            "connector.class": "VerifiableSource",
            "topic": OUT,
            "throughput": "50",
            "batch.size": "5",
            "tasks.max": "4",
            "offsets.storage.topic": OWN_TOPIC,
        }
        status, body = leader.call("POST", "/connectors", {"name": NAME, "config": config})
        assert status == 201, (status, body)
        owners = wait_for(lambda: _running(leader, 4), 90, "4 tasks running")
        frozen_tasks = sorted(t for t, w in owners.items() if w == follower.url[7:])
        # A zombie that the reset's own producer (task 0's transactional id) would not
        # fence by itself: only the leader's round of fencing stops it.
        assert any(t > 0 for t in frozen_tasks), owners
        wait_for(lambda: len(_offsets(leader)) == 4, 60, "offsets of 4 tasks")

        assert follower.proc is not None
        follower.proc.send_signal(signal.SIGSTOP)
        try:
            assert leader.call("PUT", f"/connectors/{NAME}/stop")[0] == 204
            wait_for(lambda: leader.get(f"/connectors/{NAME}/tasks") == [], 60, "stopped")
            status, body = leader.call(
                "DELETE", f"/connectors/{NAME}/offsets", retry_rebalance_s=90
            )
            assert status == 200, (status, body)
            assert body == {
                "message": "The offsets for this connector have been reset successfully"
            }
            assert _offsets(leader) == {}
            # KIP-875 alter, same path: task 1 continues after 1,000.
            status, body = leader.call(
                "PATCH",
                f"/connectors/{NAME}/offsets",
                {"offsets": [{"partition": {"id": 1}, "offset": {"seqno": 1000}}]},
                retry_rebalance_s=90,
            )
            assert status == 200, (status, body)
        finally:
            follower.proc.send_signal(signal.SIGCONT)
        # The zombies wake up and try to commit; give them the time to.
        wait_for(lambda: leader_and_followers(workers), 60, "the follower rejoined")
        time.sleep(3)
        assert _offsets(leader) == {1: 1000}
        assert _offsets(follower) == {1: 1000}
        tail = _own_topic_tail(broker.bootstrap)
        assert tail == {0: None, 1: 1000, 2: None, 3: None}, tail

        # Resumed, every task starts where the reset and the alter left it.
        resumed_ms = int(time.time() * 1000)
        assert leader.call("PUT", f"/connectors/{NAME}/resume")[0] == 202
        wait_for(lambda: _running(leader, 4), 90, "4 tasks running again")
        wait_for(lambda: all(o > 5 for o in _offsets(leader).values()), 60, "progress")
        first: dict[int, int] = {}
        for record in read_to_end(broker.bootstrap, OUT):
            value = json.loads(record.value())
            if value["time_ms"] >= resumed_ms:
                first.setdefault(value["task"], value["seqno"])
        assert first == {0: 0, 1: 1001, 2: 0, 3: 0}, first
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()
