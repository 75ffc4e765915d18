"""Response bodies of the REST API, in Kafka Connect's shapes, built from the config
snapshot and the statuses (the HTTP layer only serialises them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.runtime.restart_plan import RestartPlan
from oncelog.connect.storage.config_state import ClusterConfigSnapshot
from oncelog.connect.storage.status_records import State
from oncelog.connect.storage.status_state import StatusState

ConnectorType = Callable[[str], str | None]
"""connector name -> "source" | "sink" | None (unknown plugin)."""


def not_found(connector: str) -> ConnectRestException:
    return ConnectRestException(404, f"Connector {connector} not found")


def _require(snapshot: ClusterConfigSnapshot, connector: str) -> dict[str, str]:
    config = snapshot.connector_configs.get(connector)
    if config is None:
        raise not_found(connector)
    return config


def connector_info(
    snapshot: ClusterConfigSnapshot, connector: str, connector_type: ConnectorType
) -> dict[str, Any]:
    """``GET /connectors/{c}``."""
    config = _require(snapshot, connector)
    return {
        "name": connector,
        "config": dict(config),
        "tasks": [{"connector": t.connector, "task": t.task} for t in snapshot.tasks(connector)],
        "type": connector_type(connector) or "unknown",
    }


def connector_config(snapshot: ClusterConfigSnapshot, connector: str) -> dict[str, str]:
    """``GET /connectors/{c}/config``."""
    return dict(_require(snapshot, connector))


def task_configs(snapshot: ClusterConfigSnapshot, connector: str) -> list[dict[str, Any]]:
    """``GET /connectors/{c}/tasks``."""
    _require(snapshot, connector)
    return [
        {
            "id": {"connector": t.connector, "task": t.task},
            "config": dict(snapshot.task_configs.get(t, {})),
        }
        for t in snapshot.tasks(connector)
    ]


def connector_status(
    snapshot: ClusterConfigSnapshot,
    statuses: StatusState,
    connector: str,
    connector_type: ConnectorType,
) -> dict[str, Any]:
    """``GET /connectors/{c}/status``; a connector without a stored status yet is UNASSIGNED."""
    _require(snapshot, connector)
    status = statuses.connector_status_json(connector, connector_type(connector) or "unknown")
    if status is None:
        status = {
            "name": connector,
            "connector": {"state": State.UNASSIGNED.value, "worker_id": ""},
            "tasks": [],
            "type": connector_type(connector) or "unknown",
        }
    return status


def task_status(
    snapshot: ClusterConfigSnapshot, statuses: StatusState, connector: str, task: int
) -> dict[str, Any]:
    """``GET /connectors/{c}/tasks/{t}/status``."""
    _require(snapshot, connector)
    status = statuses.task_status_json(connector, task)
    if status is None:
        raise ConnectRestException(404, f"No status found for task {connector}-{task}")
    return status


def list_connectors(
    snapshot: ClusterConfigSnapshot,
    statuses: StatusState,
    expand: list[str],
    connector_type: ConnectorType,
) -> list[str] | dict[str, Any]:
    """``GET /connectors`` with optional ``?expand=status`` and/or ``?expand=info``."""
    names = snapshot.connectors()
    if not expand:
        return names
    out: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = connector_status(snapshot, statuses, name, connector_type)
        if "info" in expand:
            entry["info"] = connector_info(snapshot, name, connector_type)
        out[name] = entry
    return out


def restarting_status(plan: RestartPlan, status: dict[str, Any]) -> dict[str, Any]:
    """The 202 body: the connector's status with what will restart shown as RESTARTING."""
    out = {
        **status,
        "connector": dict(status["connector"]),
        "tasks": [dict(t) for t in status["tasks"]],
    }
    if plan.restart_connector:
        out["connector"]["state"] = State.RESTARTING.value
    for task in out["tasks"]:
        if task["id"] in plan.tasks:
            task["state"] = State.RESTARTING.value
            task.pop("trace", None)
    return out
