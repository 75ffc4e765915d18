"""A leader with exactly-once source support writes the config topic transactionally
(KIP-618), and the broker writes a transaction's commit marker after it answers EndTxn.
A write's read-back must still see the write: it reads to the high watermark, as
Kafka's ``KafkaBasedLog`` does, not to the last stable offset, which has not moved yet.

The broker here holds every marker back 1.5 s (``oncelog.debug.marker.delay.ms``), which
turns a rare race (seen as ``POST /connectors`` answering 404 for the connector it had
just created) into a certain one: reading to the last stable offset fails every step
below, the last one (offsets) included."""

from __future__ import annotations

import tempfile
from pathlib import Path

from oncelog.embedded import EmbeddedBroker

from .workers import WorkerProcess, worker_settings

GROUP = "readback"


def test_transactional_writes_are_seen_by_their_own_read_back() -> None:
    base = Path(tempfile.mkdtemp(prefix="connect-readback-"))
    broker = EmbeddedBroker(
        base / "data", settings={"oncelog.debug.marker.delay.ms": "1500"}
    ).start()
    worker = WorkerProcess(
        worker_settings(broker.bootstrap, GROUP, **{"exactly.once.source.support": "enabled"}),
        base / "worker.log",
    )
    try:
        worker.start(90)
        config = {"connector.class": "VerifiableSource", "topic": "readback-out", "throughput": "5"}
        for name in ("first", "second"):
            status, body = worker.call(
                "POST",
                "/connectors",
                {"name": name, "config": config, "initial_state": "STOPPED"},
            )
            assert status == 201, body
            assert body["name"] == name and body["config"]["topic"] == "readback-out"
            status, body = worker.call("GET", f"/connectors/{name}")
            assert status == 200, body
        status, body = worker.call(
            "PUT", "/connectors/first/config", {**config, "topic": "readback-other"}
        )
        assert status == 200, body
        assert body["config"]["topic"] == "readback-other"
        assert sorted(worker.get("/connectors")) == ["first", "second"]
        # KIP-875 under exactly-once: the offsets go to the global offsets topic in a
        # transaction; the answer and the next read both see them.
        status, body = worker.call(
            "PATCH",
            "/connectors/first/offsets",
            {"offsets": [{"partition": {"id": 0}, "offset": {"seqno": 41}}]},
        )
        assert status == 200, body
        assert worker.get("/connectors/first/offsets") == {
            "offsets": [{"partition": {"id": 0}, "offset": {"seqno": 41}}]
        }
        status, body = worker.call("DELETE", "/connectors/second")
        assert status == 204, body
        assert worker.get("/connectors") == ["first"]
    finally:
        worker.kill()
        broker.stop()
