"""A rolling upgrade to exactly-once source support, and a soft downgrade (KIP-618's
upgrade path): three live workers running a VerifiableSource go from ``disabled`` to
``preparing`` to ``enabled``, restarted one at a time, then one is SIGKILLed while all
are enabled, then all go back to ``preparing``.

Nothing is lost: per task, every seqno from 0 up is in the topic (read_committed). From
the moment every worker is ``enabled`` until the downgrade starts, nothing is
duplicated: the at-least-once phases may repeat records (a restarted task resumes from
its last flushed offset), the exactly-once phase may not.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import read_to_end
from .workers import WorkerProcess, wait_for, worker_settings

pytestmark = pytest.mark.xdist_group("timing")

TOPIC = "upgrade-out"
TASKS = 3


def _all_running(workers: list[WorkerProcess]) -> bool:
    for worker in workers:
        tasks = worker.get("/connectors/v/status")["tasks"]
        if len(tasks) != TASKS or any(t["state"] != "RUNNING" for t in tasks):
            return False
    return True


def _progress(bootstrap: str, records: int = 20) -> None:
    """Every task writes ``records`` more (a status can say RUNNING for a task whose
    worker was just killed; its records cannot)."""
    since_ms = int(time.time() * 1000)

    def written() -> bool:
        counts: Counter[int] = Counter()
        for message in read_to_end(bootstrap, TOPIC, "read_uncommitted"):
            value = json.loads(message.value())
            if value["time_ms"] >= since_ms:
                counts[value["task"]] += 1
        return all(counts[t] >= records for t in range(TASKS))

    wait_for(written, 90, "progress of every task")


def _roll(workers: list[WorkerProcess], bootstrap: str, support: str) -> None:
    """Restart every worker, one at a time, with ``exactly.once.source.support``."""
    for worker in workers:
        worker.settings["exactly.once.source.support"] = support
        assert worker.terminate() == 0
        worker.start(90)
        wait_for(lambda: _all_running(workers), 120, f"tasks running ({support})")
        _progress(bootstrap)


def test_rolling_upgrade_to_exactly_once_and_soft_downgrade(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="connect-eos-upgrade-"))
    broker = EmbeddedBroker(base / "data").start()
    bootstrap = broker.bootstrap
    settings = worker_settings(bootstrap, "upgrade", **{"exactly.once.source.support": "disabled"})
    workers = [WorkerProcess(settings, tmp_path / f"w{i}.log") for i in range(3)]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        for worker in workers:
            worker.start()
        config = {
            "connector.class": "VerifiableSource",
            "topic": TOPIC,
            "throughput": "60",
            "batch.size": "5",
            "tasks.max": str(TASKS),
        }
        assert workers[0].call("POST", "/connectors", {"name": "v", "config": config})[0] == 201
        wait_for(lambda: _all_running(workers), 90, "tasks running")
        _progress(bootstrap)

        _roll(workers, bootstrap, "preparing")
        _roll(workers, bootstrap, "enabled")
        enabled_ms = int(time.time() * 1000)
        # Exactly-once from here on, through a hard bounce.
        workers[1].kill()
        workers[1].start(90)
        wait_for(lambda: _all_running(workers), 120, "tasks running after the bounce")
        _progress(bootstrap, 60)
        downgrade_ms = int(time.time() * 1000)
        _roll(workers, bootstrap, "preparing")

        assert workers[0].call("PUT", "/connectors/v/stop")[0] == 204
        wait_for(lambda: workers[0].get("/connectors/v/tasks") == [], 60, "stopped")
        records: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for message in read_to_end(bootstrap, TOPIC):
            value = json.loads(message.value())
            records[value["task"]].append((value["seqno"], value["time_ms"]))
        assert sorted(records) == list(range(TASKS))
        for task, seen in sorted(records.items()):
            seqnos = [s for s, _ in seen]
            missing = sorted(set(range(max(seqnos) + 1)) - set(seqnos))
            assert missing == [], f"task {task} lost {missing[:10]}"
            # The exactly-once window: from the first seqno written once every worker
            # was enabled to the first one written once the downgrade began.
            start = min(s for s, t in seen if t >= enabled_ms)
            end = min(s for s, t in seen if t >= downgrade_ms)
            assert end - start > 50, (task, start, end)
            repeated = sorted(s for s, n in Counter(seqnos).items() if n > 1 and start <= s < end)
            assert repeated == [], f"task {task} duplicated {repeated[:10]} while enabled"
    finally:
        for worker in workers:
            worker.kill()
        broker.stop()
