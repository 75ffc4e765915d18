"""HTTP basic authentication of the Connect REST API (Kafka's JaasBasicAuthFilter and
PropertyFileLoginModule): which requests need credentials, and how they are checked."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import javaproperties
import pytest
from aiohttp.test_utils import TestClient, TestServer

from oncelog.connect.api.errors import ConfigException
from oncelog.connect.rest.app import create_app
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.rest_security import (
    BasicAuthenticator,
    basic_auth_header,
    rest_ssl_settings,
)
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.cluster_view import ClusterState

AUTH = BasicAuthenticator({"ops": "s3cret", "b": "p:w"})
WORKER = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "JsonConverter",
    "value.converter": "JsonConverter",
}


def _call(method: str, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        app = create_app(PluginRegistry.with_builtins(), view=ClusterState(), authenticator=AUTH)
        async with TestClient(TestServer(app)) as client:
            response = await client.request(
                method, path, data=b"[]", headers={"Content-Type": "application/json", **headers}
            )
            text = await response.text()
            return response.status, json.loads(text) if text else None

    return asyncio.run(run())


def test_credentials_are_checked_exactly() -> None:
    assert AUTH.authenticate(basic_auth_header("ops", "s3cret")) == "ops"
    # The password may hold a colon: only the first one separates the user.
    assert AUTH.authenticate(basic_auth_header("b", "p:w")) == "b"
    for header in (
        None,
        "",
        basic_auth_header("ops", "s3cre"),
        basic_auth_header("ops", "s3cret "),
        basic_auth_header("nobody", "s3cret"),
        basic_auth_header("", "s3cret"),
        "Bearer " + base64.b64encode(b"ops:s3cret").decode(),
        "Basic not-base64!",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
    ):
        assert AUTH.authenticate(header) is None, header
    assert AUTH.authenticate("basic " + base64.b64encode(b"ops:s3cret").decode()) == "ops"


def test_public_endpoints_need_credentials_and_internal_ones_do_not() -> None:
    good = {"Authorization": basic_auth_header("ops", "s3cret")}
    assert _call("GET", "/connectors", {}) == (
        401,
        {"error_code": 401, "message": "User cannot access the resource."},
    )
    assert _call("GET", "/connectors", good) == (200, [])
    assert _call("GET", "/", {})[0] == 401
    assert _call("GET", "/connector-plugins", {})[0] == 401
    # Only PUT on the two internal paths is exempt (answered here without a herder: 404
    # or 405, never 401); a GET of a connector's tasks is a public read.
    assert _call("PUT", "/connectors/x/tasks", {})[0] != 401
    assert _call("PUT", "/connectors/x/fence", {})[0] != 401
    assert _call("GET", "/connectors/x/tasks", {})[0] == 401
    assert _call("PUT", "/connectors/x/tasks/0/restart", {})[0] == 401
    assert _call("PUT", "/connectors/x/y/tasks", {})[0] == 401


def test_an_empty_credentials_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "users.properties"
    empty.write_text("# nobody yet\n")
    with pytest.raises(ConfigException, match="lists no user"):
        BasicAuthenticator.from_file(str(empty))


def test_https_settings_are_all_prefixed_or_all_plain() -> None:
    base = {
        **WORKER,
        "ssl.truststore.location": "/kafka-ca.pem",
        "ssl.keystore.location": "/kafka-client.pem",
    }
    assert rest_ssl_settings(WorkerConfig(base)) == {
        "ssl.truststore.location": "/kafka-ca.pem",
        "ssl.keystore.location": "/kafka-client.pem",
    }
    # Kafka's valuesWithPrefixAllOrNothing: one listeners.https. key, and the plain
    # ssl.* keys (the Kafka clients' settings) no longer apply to REST.
    prefixed = {**base, "listeners.https.ssl.keystore.location": "/rest.pem"}
    assert rest_ssl_settings(WorkerConfig(prefixed)) == {"ssl.keystore.location": "/rest.pem"}


def test_the_documented_rest_security_settings_are_valid_worker_settings() -> None:
    """docs/connect.md's properties block, as written: every key known and valid."""
    doc = (Path(__file__).parents[2] / "docs" / "connect.md").read_text()
    section = doc[doc.index("### TLS and authentication") :]
    block = section[section.index("```properties\n") + 14 : section.index("```\n", 20)]
    props = javaproperties.loads(block)
    assert props["rest.basic.auth.credentials.file"].endswith("connect-users.properties")
    config = WorkerConfig({**WORKER, **props})
    assert config.listener_urls() == ["https://0.0.0.0:8443"]
    assert rest_ssl_settings(config)["ssl.keystore.location"] == "/etc/oncelog/connect.pem"
