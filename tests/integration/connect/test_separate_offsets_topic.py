"""A source connector with its own offsets topic (KIP-618): created compacted on demand,
read as a layer over the worker's global offsets topic (the seed's "smooth migration"),
its commits copied to the global topic, and a soft downgrade of the worker to
``exactly.once.source.support=disabled`` and back without a gap or a duplicate."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from oncelog.connect.storage.offset_records import OffsetRecord, encode
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import read_to_end
from .workers import WorkerProcess, wait_for, worker_settings

GROUP = "sep"
NAME = "sep-v"
OWN_TOPIC = "sep-v-offsets"
GLOBAL_TOPIC = f"{GROUP}-offsets"


def _write_offset(bootstrap: str, topic: str, seqno: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    key, value = encode(OffsetRecord(NAME, {"id": 0}, {"seqno": seqno}))
    producer.produce(topic, key=key, value=value)
    assert producer.flush(15) == 0


def _offsets(bootstrap: str, topic: str) -> list[int]:
    """The seqnos of NAME's offset records in ``topic``, in log order per partition."""
    out = []
    for record in read_to_end(bootstrap, topic):
        connector, partition = json.loads(record.key())
        if connector == NAME and partition == {"id": 0} and record.value() is not None:
            out.append(int(json.loads(record.value())["seqno"]))
    return out


def _seqnos(bootstrap: str, topic: str) -> list[int]:
    return [json.loads(r.value())["seqno"] for r in read_to_end(bootstrap, topic)]


def _run(worker: WorkerProcess, bootstrap: str, topic: str, at_least: int) -> None:
    worker.start()
    wait_for(
        lambda: (
            [t["state"] for t in worker.get(f"/connectors/{NAME}/status")["tasks"]] == ["RUNNING"]
        ),
        60,
        "task running",
    )
    wait_for(lambda: len(_seqnos(bootstrap, topic)) >= at_least, 60, f"{at_least} records")
    assert worker.terminate() == 0


def test_separate_offsets_topic_merged_view_copy_and_soft_downgrade(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="connect-sep-"))
    broker = EmbeddedBroker(base / "data").start()
    try:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("sep-out", 1, 1)])["sep-out"].result(15)
        settings = worker_settings(bootstrap, GROUP, **{"exactly.once.source.support": "enabled"})
        first = WorkerProcess(settings, tmp_path / "w1.log").start()
        # The global topic (created by the worker) already holds an offset for the task.
        _write_offset(bootstrap, GLOBAL_TOPIC, 99)
        config = {
            "connector.class": "VerifiableSource",
            "topic": "sep-out",
            "throughput": "100",
            "batch.size": "5",
            "tasks.max": "1",
            "offsets.storage.topic": OWN_TOPIC,
        }
        status, body = first.call("POST", "/connectors", {"name": NAME, "config": config})
        assert status == 201, body
        wait_for(lambda: len(_seqnos(bootstrap, "sep-out")) >= 50, 60, "records")
        assert first.terminate() == 0
        # The separate topic was created compacted, with the worker's offsets partitions.
        resource = ConfigResource(ConfigResource.Type.TOPIC, OWN_TOPIC)
        described = admin.describe_configs([resource])[resource].result(15)
        assert described["cleanup.policy"].value == "compact"
        partitions = admin.list_topics(OWN_TOPIC, timeout=10).topics[OWN_TOPIC].partitions
        assert len(partitions) == 25
        # No offset in its own topic yet, so the task resumed from the global one: 100.
        produced = _seqnos(bootstrap, "sep-out")
        assert produced == list(range(100, 100 + len(produced)))
        own = _offsets(bootstrap, OWN_TOPIC)
        assert own and own[-1] == produced[-1]
        # Every commit was copied to the global topic, after the seeded 99.
        wait_for(lambda: _offsets(bootstrap, GLOBAL_TOPIC) == [99, *own], 30, "copies")

        # A stale global offset must not win over the separate topic.
        _write_offset(bootstrap, GLOBAL_TOPIC, 5)
        # Soft downgrade: the same connector on a worker without exactly-once support.
        downgraded = worker_settings(bootstrap, GROUP)
        _run(
            WorkerProcess(downgraded, tmp_path / "w2.log"), bootstrap, "sep-out", len(produced) + 50
        )
        after_downgrade = _seqnos(bootstrap, "sep-out")
        assert after_downgrade == list(range(100, 100 + len(after_downgrade)))
        # And back to enabled.
        _run(
            WorkerProcess(settings, tmp_path / "w3.log"),
            bootstrap,
            "sep-out",
            len(after_downgrade) + 50,
        )
        final = _seqnos(bootstrap, "sep-out")
        assert final == list(range(100, 100 + len(final)))
        own = _offsets(bootstrap, OWN_TOPIC)
        assert own[-1] == final[-1]
        wait_for(lambda: _offsets(bootstrap, GLOBAL_TOPIC)[-1] == final[-1], 30, "last copy")
    finally:
        broker.stop()


def test_implicit_offsets_topic_on_the_cluster_the_connector_writes_to(tmp_path: Path) -> None:
    """Exactly-once on, the connector's producer on another cluster, no
    offsets.storage.topic: the worker's offsets topic name is used on that cluster."""
    home = EmbeddedBroker(tmp_path / "home").start()
    away = EmbeddedBroker(tmp_path / "away").start()
    try:
        away_admin = AdminClient({"bootstrap.servers": away.bootstrap})
        away_admin.create_topics([NewTopic("away-out", 1, 1)])["away-out"].result(15)
        settings = worker_settings(
            home.bootstrap, GROUP, **{"exactly.once.source.support": "enabled"}
        )
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        try:
            config = {
                "connector.class": "VerifiableSource",
                "topic": "away-out",
                "throughput": "100",
                "batch.size": "5",
                "tasks.max": "1",
                "producer.override.bootstrap.servers": away.bootstrap,
            }
            status, body = worker.call("POST", "/connectors", {"name": NAME, "config": config})
            assert status == 201, body
            wait_for(lambda: len(_seqnos(away.bootstrap, "away-out")) >= 30, 60, "records")
            assert worker.terminate() == 0
        finally:
            worker.kill()
        produced = _seqnos(away.bootstrap, "away-out")
        assert produced == list(range(len(produced)))
        # Offsets in the away cluster's topic named like the worker's, created compacted.
        away_offsets = _offsets(away.bootstrap, GLOBAL_TOPIC)
        assert away_offsets and away_offsets[-1] == produced[-1]
        resource = ConfigResource(ConfigResource.Type.TOPIC, GLOBAL_TOPIC)
        described = away_admin.describe_configs([resource])[resource].result(15)
        assert described["cleanup.policy"].value == "compact"
        # And copied to the worker's own global topic.
        assert _offsets(home.bootstrap, GLOBAL_TOPIC) == away_offsets
    finally:
        away.stop()
        home.stop()
