"""A Connect worker configured with Kafka's worker security names (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config`` with the SCRAM login module, a PEM
``ssl.truststore.location``) against a SASL_SSL-only bootstrap, running a
VerifiableSource; and a Java-only setting refused at start, naming the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker

from ..security import make_tls, secured_settings
from .kafka_adapters import consume_all
from .workers import WorkerProcess, wait_for, worker_settings

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_worker_over_sasl_ssl_with_scram(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    added = CliRunner().invoke(
        app, ["users", "add", "connect", "--password", "c-pw", "--data-dir", str(data)]
    )
    assert added.exit_code == 0, added.output
    security = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="connect" password="c-pw";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
    }
    with EmbeddedBroker(data, settings=secured_settings(tls)) as broker:
        secured = broker.bootstrap_for("SASL_SSL")
        # a JKS truststore cannot be honoured: the worker refuses to start and says why
        bad = {**worker_settings(secured, "sec"), **security, "ssl.truststore.type": "JKS"}
        args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
        for key, value in bad.items():
            args += ["--set", f"{key}={value}"]
        refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        assert "ssl.truststore.type=JKS is not supported" in refused.stderr

        worker = WorkerProcess(
            worker_settings(secured, "sec", **security), tmp_path / "worker.log"
        ).start()
        try:
            config = {
                "connector.class": "VerifiableSource",
                "throughput": "200",
                "topic": "verified",
                "tasks.max": "1",
            }
            status, body = worker.call("POST", "/connectors", {"name": "v", "config": config})
            assert status == 201, body
            wait_for(
                lambda: (
                    worker.get("/connectors/v/status")["tasks"]
                    and worker.get("/connectors/v/status")["tasks"][0]["state"] == "RUNNING"
                ),
                40,
                "task running",
            )
            records = consume_all(broker.bootstrap, "verified", 100, timeout_s=40)
            seqnos = [json.loads(r.value())["seqno"] for r in records]
            assert len(seqnos) >= 100 and seqnos[:100] == list(range(100))
            # the worker's own topics went over SASL_SSL too
            wait_for(lambda: worker.get("/connectors/v/offsets")["offsets"], 30, "offsets stored")
            assert worker.terminate() == 0
        finally:
            worker.kill()
