"""The REST endpoints that need no herder, over real HTTP (aiohttp test server):
plugin listing, plugin config keys, validation, and Kafka's error format."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from oncelog.connect.rest.app import create_app
from oncelog.connect.runtime.plugins import FILE_STREAM_PLUGIN, PluginRegistry
from oncelog.connect.storage.cluster_view import ClusterState


def _call(
    method: str, path: str, body: bytes | None = None, policy: str = "All"
) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        app = create_app(
            PluginRegistry.discover([FILE_STREAM_PLUGIN], entry_points=False),
            override_policy=policy,
        )
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


def _cluster() -> ClusterState:
    from oncelog.connect.storage import config_records as cr
    from oncelog.connect.storage import offset_records as orec
    from oncelog.connect.storage import status_records as sr

    cluster = ClusterState()
    records = [
        cr.ConnectorConfigRecord(
            "src", {"connector.class": "FileStreamSource", "file": "/in", "topic": "t"}
        ),
        *cr.task_config_records("src", [{"file": "/in", "topic": "t", "task.class": "x.Task"}]),
        cr.ConnectorConfigRecord("snk", {"connector.class": "FileStreamSink", "topics": "t"}),
    ]
    for offset, record in enumerate(records):
        cluster.apply_config(offset, *cr.encode(record))
    for status in (
        sr.ConnectorStatus("src", sr.State.RUNNING, "w1:8083", 1),
        sr.TaskStatus("src", 0, sr.State.FAILED, "w2:8083", 1, "Traceback: boom"),
        sr.TopicStatus("t", "src", 0, 5),
    ):
        cluster.apply_status(*sr.encode(status))
    cluster.apply_offset(
        *orec.encode(orec.OffsetRecord("src", {"filename": "/in"}, {"position": 42}))
    )
    return cluster


def _get(path: str) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        app = create_app(
            PluginRegistry.discover([FILE_STREAM_PLUGIN], entry_points=False), view=_cluster()
        )
        async with TestClient(TestServer(app)) as client:
            response = await client.get(path)
            return response.status, await response.json()

    return asyncio.run(run())


def test_read_only_connector_endpoints() -> None:
    assert _get("/connectors") == (200, ["snk", "src"])
    status, expanded = _get("/connectors?expand=status&expand=info")
    assert (
        status == 200
        and set(expanded["src"]) == {"status", "info"}
        and expanded["snk"]["info"]["type"] == "sink"
    )
    assert _get("/connectors/src") == (200, {
        "name": "src",
        "config": {"connector.class": "FileStreamSource", "file": "/in", "topic": "t"},
        "tasks": [{"connector": "src", "task": 0}],
        "type": "source",
    })  # fmt: skip
    assert _get("/connectors/src/config")[1] == {
        "connector.class": "FileStreamSource",
        "file": "/in",
        "topic": "t",
    }
    assert _get("/connectors/src/tasks")[1] == [
        {
            "id": {"connector": "src", "task": 0},
            "config": {"file": "/in", "topic": "t", "task.class": "x.Task"},
        }
    ]
    assert _get("/connectors/src/status") == (200, {
        "name": "src",
        "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
        "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w2:8083", "trace": "Traceback: boom"}],
        "type": "source",
    })  # fmt: skip
    assert _get("/connectors/snk/status")[1]["connector"] == {
        "state": "UNASSIGNED",
        "worker_id": "",
    }
    assert _get("/connectors/src/tasks/0/status") == (
        200,
        {"id": 0, "state": "FAILED", "worker_id": "w2:8083", "trace": "Traceback: boom"},
    )
    assert _get("/connectors/src/topics") == (200, {"src": {"topics": ["t"]}})
    assert _get("/connectors/src/offsets") == (
        200,
        {"offsets": [{"partition": {"filename": "/in"}, "offset": {"position": 42}}]},
    )
    assert _get("/connectors/nope") == (
        404,
        {"error_code": 404, "message": "Connector nope not found"},
    )
    assert (
        _get("/connectors/nope/status")[0] == 404
        and _get("/connectors/src/tasks/x/status")[0] == 404
    )
    status, spec = _get("/openapi.json")
    assert "/connectors/{connector}/status" in spec["paths"] and "/connectors" in spec["paths"]


def test_openapi_lists_the_endpoints_that_change_the_cluster_only_when_served() -> None:
    from oncelog.connect.rest.app import openapi

    without = openapi(connectors=True)["paths"]
    assert "post" not in without["/connectors"] and "/health" not in without
    paths = openapi(connectors=True, herder=True)["paths"]
    assert sorted(paths["/connectors"]) == ["get", "post"]
    assert sorted(paths["/connectors/{connector}"]) == ["delete", "get"]
    assert sorted(paths["/connectors/{connector}/offsets"]) == ["delete", "get", "patch"]
    restart = paths["/connectors/{connector}/restart"]["post"]
    assert [p["name"] for p in restart["parameters"]] == ["connector", "includeTasks", "onlyFailed"]
    assert sorted(restart["responses"]) == ["202", "404", "409"]
