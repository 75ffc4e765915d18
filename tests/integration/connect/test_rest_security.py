"""Attacks on a Connect worker's REST API, reproduced as an attacker would run them.

- Naming a Python module in a request must not import it (importing runs its code):
  ``this`` prints the Zen of Python on import, on the worker's stdout.
- A web page a developer visits can send a ``text/plain`` POST without a CORS
  preflight: bodies must be JSON (415), and other origins are refused (403).
- The FileStream connectors, which write any file a caller names, are off by default.
- The default listener binds loopback (https and authentication:
  ``test_rest_tls_auth``).
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.embedded import EmbeddedBroker

from .workers import WorkerProcess, worker_settings

ZEN = "The Zen of Python"


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    base = Path(tempfile.mkdtemp(prefix="connect-rest-security-"))
    broker = EmbeddedBroker(base / "data").start()
    # The default plugin set: no FileStream connectors.
    settings = worker_settings(
        broker.bootstrap, "restsec", **{"plugin.path": "tests.integration.connect.eos_connectors"}
    )
    process = WorkerProcess(settings, base / "worker.log")
    try:
        yield process.start()
    finally:
        process.kill()
        broker.stop()


def _request(
    worker: WorkerProcess, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, Any]:
    request = urllib.request.Request(worker.url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def _zen_printed(worker: WorkerProcess) -> bool:
    time.sleep(0.5)  # stdout is pumped by a thread
    return any(ZEN in line for line in worker.lines) or ZEN in worker.log_tail(500)


def test_a_module_named_in_a_request_is_never_imported(worker: WorkerProcess) -> None:
    status, body = worker.call("GET", "/connector-plugins/this.Zen/config")
    assert status == 404, (status, body)
    status, body = worker.call(
        "PUT",
        "/connector-plugins/this.Zen/config/validate",
        {"connector.class": "this.Zen", "name": "z"},
    )
    assert status in (400, 404), (status, body)
    config = {"connector.class": "this.Zen", "topic": "t"}
    status, body = worker.call("POST", "/connectors", {"name": "zen", "config": config})
    assert status == 400, (status, body)
    assert "Class this.Zen could not be found" in json.dumps(body), body
    # A registered connector with a converter, transform and predicate named by module.
    config = {
        "connector.class": "VerifiableSource",
        "topic": "t",
        "throughput": "1",
        "value.converter": "this.Converter",
        "transforms": "x",
        "transforms.x.type": "this.Transform",
    }
    status, body = worker.call("POST", "/connectors", {"name": "zen2", "config": config})
    assert status == 400, (status, body)
    assert not _zen_printed(worker), "a module named in a request was imported"
    assert worker.proc is not None and worker.proc.poll() is None


def test_a_text_plain_post_from_another_origin_creates_nothing(worker: WorkerProcess) -> None:
    body = json.dumps(
        {"name": "csrf", "config": {"connector.class": "VerifiableSource", "topic": "t"}}
    ).encode()
    status, answer = _request(worker, "POST", "/connectors", body, {"Content-Type": "text/plain"})
    assert (status, answer) == (
        415,
        {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"},
    )
    status, answer = _request(
        worker,
        "POST",
        "/connectors",
        body,
        {"Content-Type": "application/json", "Origin": "http://evil.example"},
    )
    assert status == 403, answer
    assert "Cross-origin request from http://evil.example refused" in answer["message"]
    assert "csrf" not in worker.get("/connectors")
    # The API's own origin and requests without one are served.
    status, _ = _request(worker, "GET", "/connectors", None, {"Origin": worker.url})
    assert status == 200


def test_the_file_stream_connectors_are_off_by_default(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    """A FileStreamSink writes wherever a caller says, as the worker's user: off unless
    plugin.path names it (Kafka since 3.2)."""
    plugins = [p["class"] for p in worker.get("/connector-plugins")]
    assert "oncelog.connect.connectors.verifiable.VerifiableSourceConnector" in plugins
    assert not [p for p in plugins if "FileStream" in p]
    target = tmp_path / "written-by-rest.py"
    config = {"connector.class": "FileStreamSink", "topics": "t", "file": str(target)}
    status, body = worker.call("POST", "/connectors", {"name": "fs", "config": config})
    assert status == 400, (status, body)
    assert (
        "Class FileStreamSink could not be found. The FileStream connectors are off by "
        "default: add oncelog.connect.connectors.file_stream to plugin.path to enable them."
    ) in body["message"]
    assert "fs" not in worker.get("/connectors")
    assert not target.exists()


def test_the_default_listener_binds_loopback() -> None:
    settings = worker_settings("127.0.0.1:1", "g")
    assert WorkerConfig(settings).get_list("listeners") == ["http://127.0.0.1:8083"]
