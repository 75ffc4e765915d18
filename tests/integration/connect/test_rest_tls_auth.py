"""A Connect cluster's REST API over TLS with HTTP basic authentication, against a
SASL_SSL-only broker (Kafka's ``listeners=https://…``, ``listeners.https.ssl.*`` and
``BasicAuthSecurityRestExtension``):

- an https listener serves TLS only: a plain-HTTP request gets no answer;
- every public endpoint needs valid credentials (401 without, with a wrong password,
  or for an unknown user); the internal endpoints are exempt and verified by their
  signature instead, so two workers still hand task configs to the leader;
- a request to a follower is forwarded to the leader with the caller's credentials;
- with ``listeners.https.ssl.client.auth=required``, a client without a certificate
  from the trusted CA cannot connect, and the workers reach each other with theirs.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker

from ..security import TlsFiles, make_tls, secured_settings
from .kafka_adapters import consume_all
from .workers import WorkerProcess, leader_and_followers, wait_for, worker_settings

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = {"ops": "ops-secret", "viewer": "viewer-secret"}


def _credentials_file(path: Path) -> Path:
    path.write_text("".join(f"{u}={p}\n" for u, p in USERS.items()))
    path.chmod(0o600)
    return path


def _client_context(tls: TlsFiles, *, cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    if cert:
        ctx.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return ctx


def _get(url: str, ctx: ssl.SSLContext | None, auth: tuple[str, str] | None) -> tuple[int, Any]:
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=ctx) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _rest_settings(tls: TlsFiles, credentials: Path, client_auth: str) -> dict[str, str]:
    return {
        "listeners.https.ssl.keystore.type": "PEM",
        "listeners.https.ssl.keystore.location": str(tls.server),
        "listeners.https.ssl.truststore.type": "PEM",
        "listeners.https.ssl.truststore.location": str(tls.ca),
        "listeners.https.ssl.client.auth": client_auth,
        "rest.extension.classes": (
            "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
        ),
        "rest.basic.auth.credentials.file": str(credentials),
    }


@pytest.fixture
def secured_broker(tmp_path: Path) -> Any:
    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    added = CliRunner().invoke(
        app, ["users", "add", "connect", "--password", "c-pw", "--data-dir", str(data)]
    )
    assert added.exit_code == 0, added.output
    with EmbeddedBroker(data, settings=secured_settings(tls)) as broker:
        kafka_security = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="connect" password="c-pw";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca),
        }
        yield broker, tls, kafka_security


def test_a_cluster_over_https_with_basic_auth(secured_broker: Any, tmp_path: Path) -> None:
    broker, tls, kafka_security = secured_broker
    credentials = _credentials_file(tmp_path / "rest-users.properties")
    ctx = _client_context(tls)
    settings = worker_settings(
        broker.bootstrap_for("SASL_SSL"),
        "tlsauth",
        **kafka_security,
        **_rest_settings(tls, credentials, "none"),
    )
    workers = [
        WorkerProcess(settings, tmp_path / f"w{i}.log", tls=ctx, auth=("ops", USERS["ops"]))
        for i in range(2)
    ]
    try:
        for w in workers:
            w.start()
        leader, (follower,) = leader_and_followers(workers)
        assert follower.url.startswith("https://")

        # TLS only: a plain-HTTP request on the https port gets no HTTP answer.
        plain = http.client.HTTPConnection("127.0.0.1", follower.port, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            plain.request("GET", "/connectors")
            plain.getresponse()
        plain.close()

        # Public endpoints need valid credentials.
        url = follower.url + "/connectors"
        assert _get(url, ctx, None) == (
            401,
            {"error_code": 401, "message": "User cannot access the resource."},
        )
        assert _get(url, ctx, ("ops", "wrong"))[0] == 401
        assert _get(url, ctx, ("mallory", "ops-secret"))[0] == 401
        assert _get(url, ctx, ("viewer", USERS["viewer"])) == (200, [])
        assert _get(follower.url + "/", ctx, None)[0] == 401

        # A write on the follower is forwarded to the leader with the caller's
        # credentials; the connector's two tasks reach the leader through the
        # internal endpoint (signed, exempt from basic auth).
        config = {
            "connector.class": "VerifiableSource",
            "throughput": "200",
            "topic": "verified",
            "tasks.max": "2",
        }
        status, body = follower.call("POST", "/connectors", {"name": "v", "config": config})
        assert status == 201, body
        wait_for(
            lambda: (
                [t["state"] for t in leader.get("/connectors/v/status")["tasks"]]
                == ["RUNNING", "RUNNING"]
            ),
            60,
            "both tasks running",
        )
        records = consume_all(broker.bootstrap, "verified", 100, timeout_s=40)
        assert len(records) >= 100

        # An unsigned call of the internal endpoint is refused by its signature check.
        status, body = follower.call("PUT", "/connectors/v/tasks?forward=false", [{"a": "b"}])
        assert (status, body["message"]) == (400, "Internal request missing required signature")
    finally:
        for w in workers:
            w.kill()


def test_mutual_tls_requires_a_client_certificate(secured_broker: Any, tmp_path: Path) -> None:
    broker, tls, kafka_security = secured_broker
    credentials = _credentials_file(tmp_path / "rest-users.properties")
    settings = worker_settings(
        broker.bootstrap_for("SASL_SSL"),
        "mtls",
        **kafka_security,
        **_rest_settings(tls, credentials, "required"),
    )
    with_cert = _client_context(tls, cert=True)
    workers = [
        WorkerProcess(settings, tmp_path / f"w{i}.log", tls=with_cert, auth=("ops", USERS["ops"]))
        for i in range(2)
    ]
    try:
        for w in workers:
            w.start()
        leader, (follower,) = leader_and_followers(workers)
        # Without a client certificate the handshake fails; with one, the request is served.
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            _get(follower.url + "/connectors", _client_context(tls), ("ops", USERS["ops"]))
        assert _get(follower.url + "/connectors", with_cert, ("ops", USERS["ops"])) == (200, [])
        # Worker to worker over mutual TLS: a forwarded write, then task configs.
        config = {
            "connector.class": "VerifiableSource",
            "throughput": "10",
            "topic": "m",
            "tasks.max": "1",
        }
        status, body = follower.call("POST", "/connectors", {"name": "m", "config": config})
        assert status == 201, body
        wait_for(
            lambda: (
                [t["state"] for t in leader.get("/connectors/m/status")["tasks"]] == ["RUNNING"]
            ),
            60,
            "task running",
        )
    finally:
        for w in workers:
            w.kill()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"listeners": "https://127.0.0.1:0"},
            "TLS needs ssl.keystore.location or ssl.keystore.certificate.chain",
        ),
        (
            {"rest.extension.classes": "com.example.MyExtension"},
            "Unknown REST extension com.example.MyExtension",
        ),
        (
            {"rest.extension.classes": "BasicAuthSecurityRestExtension"},
            "BasicAuthSecurityRestExtension needs rest.basic.auth.credentials.file",
        ),
        ({"rest.basic.auth.credentials.file": "/nonexistent/users"}, "Cannot read the credentials"),
    ],
)
def test_a_wrong_rest_security_setting_stops_the_worker_with_one_message(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
    for key, value in {**worker_settings("127.0.0.1:1", "bad"), **extra}.items():
        args += ["--set", f"{key}={value}"]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert refused.returncode in (1, 2), refused.stderr
    assert message in refused.stderr
    assert "Traceback" not in refused.stderr
