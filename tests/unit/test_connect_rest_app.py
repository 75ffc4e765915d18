"""The REST endpoints that need no herder, over real HTTP (aiohttp test server):
plugin listing, plugin config keys, validation, and Kafka's error format."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from oncelog.connect.plugins import PluginRegistry
from oncelog.connect.rest_app import create_app


def _call(
    method: str, path: str, body: bytes | None = None, policy: str = "All"
) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        app = create_app(PluginRegistry.with_builtins(), override_policy=policy)
        async with TestClient(TestServer(app)) as client:
            response = await client.request(
                method, path, data=body, headers={"Content-Type": "application/json"}
            )
            return response.status, await response.json()

    return asyncio.run(run())


def test_list_plugins() -> None:
    status, body = _call("GET", "/connector-plugins")
    assert status == 200
    assert {
        "class": "oncelog.connect.connectors.file_stream.FileStreamSourceConnector",
        "type": "source",
        "version": "0.1.0",
    } in body
    assert {p["type"] for p in body} == {"source", "sink"}
    status, everything = _call("GET", "/connector-plugins?connectorsOnly=false")
    assert {p["type"] for p in everything} == {
        "source",
        "sink",
        "converter",
        "transformation",
        "predicate",
    }


def test_plugin_config_keys() -> None:
    status, body = _call("GET", "/connector-plugins/FileStreamSource/config")
    assert status == 200
    assert [k["name"] for k in body] == ["file", "topic", "batch.size"]
    assert body[2]["default_value"] == "2000" and body[1]["required"] is True
    assert _call("GET", "/connector-plugins/Nope/config") == (
        404,
        {"error_code": 404, "message": "Unknown plugin Nope."},
    )


def test_validate() -> None:
    config = {"name": "f", "topic": "", "tasks.max": "0", "producer.override.acks": "1"}
    status, body = _call(
        "PUT",
        "/connector-plugins/FileStreamSource/config/validate",
        json.dumps(config).encode(),
        "None",
    )
    assert status == 200
    assert body["name"] == "oncelog.connect.connectors.file_stream.FileStreamSourceConnector"
    errors = {
        c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]
    }
    assert errors == {
        "tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
        "topic": ["Invalid value  for configuration topic: String must be non-empty"],
        "producer.override.acks": [
            "The 'None' policy does not allow 'acks' to be overridden in the connector configuration."
        ],
    }
    assert body["error_count"] == 3
    ok = {
        "name": "f",
        "topic": "t",
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
    }
    status, body = _call(
        "PUT", "/connector-plugins/FileStreamSource/config/validate", json.dumps(ok).encode()
    )
    assert (status, body["error_count"]) == (200, 0)


def test_errors_use_kafkas_format() -> None:
    status, body = _call("PUT", "/connector-plugins/FileStreamSource/config/validate", b"{not json")
    assert (
        status == 400 and body["error_code"] == 400 and body["message"].startswith("Malformed JSON")
    )
    mismatch = json.dumps({"connector.class": "FileStreamSink"}).encode()
    assert _call("PUT", "/connector-plugins/FileStreamSource/config/validate", mismatch) == (
        400,
        {
            "error_code": 400,
            "message": "Included connector type FileStreamSink does not match request type FileStreamSource",
        },
    )
    assert (
        _call("PUT", "/connector-plugins/FileStreamSource/config/validate", b'{"tasks.max": 1}')[0]
        == 400
    )
    assert _call("GET", "/no/such/path") == (
        404,
        {"error_code": 404, "message": "HTTP 404 Not Found"},
    )
    assert _call("DELETE", "/connector-plugins") == (
        405,
        {"error_code": 405, "message": "HTTP 405 Method Not Allowed"},
    )
    status, spec = _call("GET", "/openapi.json")
    assert status == 200 and set(spec["paths"]) == {
        "/connector-plugins", "/connector-plugins/{plugin}/config", "/connector-plugins/{plugin}/config/validate"
    }  # fmt: skip
