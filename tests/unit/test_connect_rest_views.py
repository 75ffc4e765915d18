"""REST response bodies (Kafka's shapes), KIP-745 restart plans, and internal request signing."""

from __future__ import annotations

import pytest

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed.request_signing import (
    ALGORITHM_HEADER,
    SIGNATURE_HEADER,
    sign,
    verify,
)
from oncelog.connect.rest.views import (
    connector_config,
    connector_info,
    connector_status,
    list_connectors,
    restarting_status,
    task_configs,
    task_status,
)
from oncelog.connect.runtime.restart_plan import restart_plan
from oncelog.connect.storage.config_records import ConnectorConfigRecord, task_config_records
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigState
from oncelog.connect.storage.status_records import ConnectorStatus, State, TaskStatus
from oncelog.connect.storage.status_state import StatusState


def _types(name: str) -> str | None:
    return {"src": "source"}.get(name)


def _snapshot() -> ClusterConfigSnapshot:
    state = ConfigState()
    for record in [
        ConnectorConfigRecord("src", {"connector.class": "VerifiableSource"}),
        *task_config_records("src", [{"id": "0"}, {"id": "1"}]),
    ]:
        state.apply(state.offset, record)
    return state.snapshot()


def _statuses() -> StatusState:
    statuses = StatusState()
    statuses.apply(ConnectorStatus("src", State.RUNNING, "w1", 1))
    statuses.apply(TaskStatus("src", 0, State.RUNNING, "w1", 1))
    statuses.apply(TaskStatus("src", 1, State.FAILED, "w2", 1, "boom"))
    return statuses


def test_connector_views() -> None:
    snap = _snapshot()
    assert connector_info(snap, "src", _types) == {
        "name": "src",
        "config": {"connector.class": "VerifiableSource"},
        "tasks": [{"connector": "src", "task": 0}, {"connector": "src", "task": 1}],
        "type": "source",
    }
    assert connector_config(snap, "src") == {"connector.class": "VerifiableSource"}
    assert task_configs(snap, "src") == [
        {"id": {"connector": "src", "task": 0}, "config": {"id": "0"}},
        {"id": {"connector": "src", "task": 1}, "config": {"id": "1"}},
    ]
    assert list_connectors(snap, _statuses(), [], _types) == ["src"]
    expanded = list_connectors(snap, _statuses(), ["status", "info"], _types)
    assert isinstance(expanded, dict) and set(expanded["src"]) == {"status", "info"}
    assert expanded["src"]["status"]["tasks"][1] == {
        "id": 1,
        "state": "FAILED",
        "worker_id": "w2",
        "trace": "boom",
    }
    assert connector_status(snap, StatusState(), "src", _types)["connector"] == {
        "state": "UNASSIGNED",
        "worker_id": "",
    }
    assert task_status(snap, _statuses(), "src", 0) == {
        "id": 0,
        "state": "RUNNING",
        "worker_id": "w1",
    }
    with pytest.raises(ConnectRestException) as err:
        connector_info(snap, "nope", _types)
    assert err.value.status == 404 and err.value.body() == {
        "error_code": 404,
        "message": "Connector nope not found",
    }
    with pytest.raises(ConnectRestException, match="No status found for task src-7"):
        task_status(snap, _statuses(), "src", 7)


def test_restart_plans() -> None:
    statuses = _statuses()
    assert restart_plan(statuses, "src", include_tasks=False, only_failed=False).tasks == ()
    only_failed = restart_plan(statuses, "src", include_tasks=True, only_failed=True)
    assert (only_failed.restart_connector, only_failed.tasks) == (False, (1,))
    everything = restart_plan(statuses, "src", include_tasks=True, only_failed=False)
    assert (everything.restart_connector, everything.tasks) == (True, (0, 1))
    status = statuses.connector_status_json("src", "source")
    assert status is not None
    shown = restarting_status(only_failed, status)
    assert shown["connector"]["state"] == "RUNNING"
    assert shown["tasks"] == [
        {"id": 0, "state": "RUNNING", "worker_id": "w1"},
        {"id": 1, "state": "RESTARTING", "worker_id": "w2"},
    ]
    assert status["tasks"][1]["state"] == "FAILED"  # the input is not modified
    assert restart_plan(StatusState(), "src", True, True).is_empty()


def test_request_signing() -> None:
    key = bytes(range(32))
    body = b'[{"id":"0"}]'
    headers = sign(key, body)
    assert headers[ALGORITHM_HEADER] == "HmacSHA256"
    assert verify(key, body, headers, ["HmacSHA256"]) is None
    assert verify(key, body, {k.lower(): v for k, v in headers.items()}, ["HmacSHA256"]) is None
    assert (
        verify(key, body + b" ", headers, ["HmacSHA256"])
        == "Internal request contained invalid signature."
    )
    assert (
        verify(b"other" * 8, body, headers, ["HmacSHA256"])
        == "Internal request contained invalid signature."
    )
    assert verify(key, body, {}, ["HmacSHA256"]) == "Internal request missing required signature"
    assert verify(key, body, sign(key, body, "HmacSHA512"), ["HmacSHA256"]) == (
        "Internal request signature algorithm HmacSHA512 is not permitted"
    )
    assert (
        verify(key, body, {**headers, SIGNATURE_HEADER: "!!"}, ["HmacSHA256"])
        == "Internal request signature is not valid base64"
    )
