"""Config, status and offsets topic records: Kafka Connect's keys and JSON values."""

from __future__ import annotations

import json

import pytest

from oncelog.connect.api.errors import DataException
from oncelog.connect.storage import config_records as cr
from oncelog.connect.storage import offset_records as orec
from oncelog.connect.storage import status_records as sr


@pytest.mark.parametrize(
    ("record", "key", "value"),
    [
        (cr.ConnectorConfigRecord("my-conn", {"connector.class": "FileStreamSource", "tasks.max": "1"}),
         "connector-my-conn", b'{"properties":{"connector.class":"FileStreamSource","tasks.max":"1"}}'),
        (cr.ConnectorConfigRecord("my-conn", None), "connector-my-conn", None),
        (cr.TaskConfigRecord("my-conn", 12, {"topic": "t"}), "task-my-conn-12", b'{"properties":{"topic":"t"}}'),
        (cr.TaskCommitRecord("my-conn", 3), "commit-my-conn", b'{"tasks":3}'),
        (cr.TargetStateRecord("c", cr.TargetState.STARTED), "target-state-c", b'{"state":"STARTED","state.v2":"STARTED"}'),
        (cr.TargetStateRecord("c", cr.TargetState.PAUSED), "target-state-c", b'{"state":"PAUSED","state.v2":"PAUSED"}'),
        (cr.TargetStateRecord("c", cr.TargetState.STOPPED), "target-state-c", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        (cr.TargetStateRecord("c", None), "target-state-c", None),
        (cr.TaskCountRecord("c", 4), "tasks-fencing-c", b'{"task-count":4}'),
        (cr.SessionKeyRecord(b"\x00\x01secret", "HmacSHA256", 1700000000000), "session-key",
         b'{"key":"AAFzZWNyZXQ=","algorithm":"HmacSHA256","creation-timestamp":1700000000000}'),
        (cr.RestartRequestRecord("c", True, False), "restart-connector-c", b'{"include-tasks":true,"only-failed":false}'),
        (cr.LoggerLevelRecord("org.example", "DEBUG"), "logger-cluster-org.example", b'{"level":"DEBUG"}'),
    ],
)  # fmt: skip
def test_config_records_round_trip(record: cr.ConfigRecord, key: str, value: bytes | None) -> None:
    assert cr.encode(record) == (key, value)
    assert cr.decode(key.encode(), value) == record


def test_config_records_from_older_and_other_writers() -> None:
    # A pre-3.5 worker writes only "state"; Jackson may add spaces, and task keys parse at the last dash.
    assert cr.decode("target-state-c", b'{"state": "PAUSED"}') == cr.TargetStateRecord(
        "c", cr.TargetState.PAUSED
    )
    assert cr.decode("task-a-b-c-0", b'{"properties": {}}') == cr.TaskConfigRecord("a-b-c", 0, {})
    assert cr.decode("restart-connector-c", b"{}") == cr.RestartRequestRecord("c", False, False)
    for key, value, message in [
        ("task-c-x", b'{"properties":{}}', "couldn't be parsed as a task config key"),
        ("commit-c", b'{"tasks":"3"}', "'tasks' is str"),
        ("target-state-c", b'{"state":"RUNNING"}', "Invalid target state for connector 'c'"),
        ("connector-c", b"[]", "is not a JSON object"),
        (
            "something-else",
            b"{}",
            "Discarding config update record with invalid key: something-else",
        ),
        ("commit-c", None, "Ignoring tombstone"),
    ]:
        with pytest.raises(DataException, match=message):
            cr.decode(key, value)


def test_status_records() -> None:
    running = sr.ConnectorStatus("c", sr.State.RUNNING, "10.0.0.1:8083", 7)
    assert sr.encode(running) == (
        "status-connector-c",
        b'{"state":"RUNNING","trace":null,"worker_id":"10.0.0.1:8083","generation":7}',
    )
    failed = sr.TaskStatus("my-conn", 2, sr.State.FAILED, "w:1", 3, "Traceback: boom")
    key, value = sr.encode(failed)
    assert key == "status-task-my-conn-2"
    assert json.loads(value or b"") == {
        "state": "FAILED",
        "trace": "Traceback: boom",
        "worker_id": "w:1",
        "generation": 3,
    }
    assert sr.decode(key, value) == failed
    assert sr.decode(*sr.encode(running)) == running
    assert sr.encode(sr.TaskStatus("c", 0, sr.State.DESTROYED, "w", 1)) == ("status-task-c-0", None)
    assert sr.decode("status-task-c-0", None) == sr.StatusTombstone("c", 0)
    assert sr.decode("status-connector-c", None) == sr.StatusTombstone("c")
    topic = sr.TopicStatus("orders", "c", 1, 1700000000000)
    assert sr.encode(topic) == (
        "status-topic-orders:connector-c",
        b'{"topic":{"name":"orders","connector":"c","task":1,"discoverTimestamp":1700000000000}}',
    )
    assert sr.decode(*sr.encode(topic)) == topic
    assert sr.decode("status-topic-orders:connector-c", None) == sr.StatusTombstone(
        "c", topic="orders"
    )
    for state in ("UNASSIGNED", "PAUSED", "RESTARTING", "STOPPED"):
        decoded = sr.decode(
            "status-connector-c",
            json.dumps({"state": state, "trace": None, "worker_id": "w", "generation": 0}).encode(),
        )
        assert isinstance(decoded, sr.ConnectorStatus) and decoded.state.value == state
    with pytest.raises(DataException, match="Failed to deserialize status record"):
        sr.decode("status-connector-c", b'{"state":"SLEEPING","worker_id":"w","generation":0}')
    with pytest.raises(DataException, match="Invalid task ID"):
        sr.decode("status-task-c", b"{}")


def test_offset_records() -> None:
    record = orec.OffsetRecord("file-source", {"filename": "/tmp/in.txt"}, {"position": 1024})
    assert orec.encode(record) == (
        b'["file-source",{"filename":"/tmp/in.txt"}]',
        b'{"position":1024}',
    )
    assert orec.decode(*orec.encode(record)) == record
    # Keys as Kafka's Jackson writes them (field order of the connector's map) parse the same.
    kafka_key = b'["pg",{"table":"public.t","protocol":"1"}]'
    decoded = orec.decode(kafka_key, b'{"incrementing":5}')
    assert decoded == orec.OffsetRecord(
        "pg", {"protocol": "1", "table": "public.t"}, {"incrementing": 5}
    )
    assert (
        orec.encode_key("pg", {"table": "public.t", "protocol": "1"})
        == b'["pg",{"protocol":"1","table":"public.t"}]'
    )
    assert orec.decode(b'["c",{"id":0}]', None) == orec.OffsetRecord("c", {"id": 0}, None)
    assert orec.encode(orec.OffsetRecord("c", {"id": 0}, None)) == (b'["c",{"id":0}]', None)
    with pytest.raises(
        DataException,
        match="Offsets may only contain primitive types as values, but field nested contains dict",
    ):
        orec.encode(orec.OffsetRecord("c", {"id": 0}, {"nested": {"a": 1}}))
    with pytest.raises(DataException, match="Offsets may only use String keys"):
        orec.encode_key("c", {1: "x"})  # type: ignore[dict-item]
    for key in (b'{"c": 1}', b'["c"]', b"[1, {}]", b'["c", 5]', b"not json"):
        with pytest.raises(DataException, match="Ignoring offset partition key"):
            orec.decode(key, None)
