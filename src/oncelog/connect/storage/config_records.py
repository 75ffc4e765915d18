"""Records of the config topic, keyed and encoded exactly as Kafka Connect writes them.

Keys are plain strings; values are JSON with schemas disabled (Kafka's internal
``JsonConverter``), so Kafka's own workers and tools can read what oncelog writes
and the other way round:

=================================  ===================================================
key                                value
=================================  ===================================================
``connector-<name>``               ``{"properties":{…}}``; a tombstone deletes
``task-<name>-<n>``                ``{"properties":{…}}``
``commit-<name>``                  ``{"tasks":<count>}`` (makes the task configs live)
``target-state-<name>``            ``{"state":"PAUSED","state.v2":"STOPPED"}``
``tasks-fencing-<name>``           ``{"task-count":<n>}`` (KIP-618 zombie fencing)
``session-key``                    ``{"key":<base64>,"algorithm":…,"creation-timestamp":ms}``
``restart-connector-<name>``       ``{"include-tasks":bool,"only-failed":bool}``
``logger-cluster-<namespace>``     ``{"level":…}``
=================================  ===================================================

Older workers only know ``state`` (no STOPPED), so STOPPED is written as
``state=PAUSED`` plus ``state.v2=STOPPED``; readers prefer ``state.v2``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from oncelog.connect.api.errors import DataException
from oncelog.connect.api.target_state import TargetState

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_TASKS_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
TASK_COUNT_RECORD_PREFIX = "tasks-fencing-"
SESSION_KEY_KEY = "session-key"
RESTART_PREFIX = "restart-connector-"
LOGGER_CLUSTER_PREFIX = "logger-cluster-"


@dataclass(frozen=True)
class ConnectorConfigRecord:
    connector: str
    properties: dict[str, str] | None  # None: the connector was deleted


@dataclass(frozen=True)
class TaskConfigRecord:
    connector: str
    task: int
    properties: dict[str, str] | None


@dataclass(frozen=True)
class TaskCommitRecord:
    connector: str
    tasks: int


@dataclass(frozen=True)
class TargetStateRecord:
    connector: str
    state: TargetState | None  # None: removed with the connector


@dataclass(frozen=True)
class TaskCountRecord:
    connector: str
    task_count: int


@dataclass(frozen=True)
class SessionKeyRecord:
    key: bytes
    algorithm: str
    creation_timestamp: int


@dataclass(frozen=True)
class RestartRequestRecord:
    connector: str
    include_tasks: bool = False
    only_failed: bool = False


@dataclass(frozen=True)
class LoggerLevelRecord:
    namespace: str
    level: str


ConfigRecord = (
    ConnectorConfigRecord
    | TaskConfigRecord
    | TaskCommitRecord
    | TargetStateRecord
    | TaskCountRecord
    | SessionKeyRecord
    | RestartRequestRecord
    | LoggerLevelRecord
)


def _json(value: Any) -> bytes:
    # Compact and in field order, as Jackson writes Kafka's structs.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def encode(record: ConfigRecord) -> tuple[str, bytes | None]:
    """The (key, value) Kafka Connect would write for ``record``."""
    if isinstance(record, ConnectorConfigRecord):
        value = None if record.properties is None else _json({"properties": record.properties})
        return CONNECTOR_PREFIX + record.connector, value
    if isinstance(record, TaskConfigRecord):
        value = None if record.properties is None else _json({"properties": record.properties})
        return f"{TASK_PREFIX}{record.connector}-{record.task}", value
    if isinstance(record, TaskCommitRecord):
        return COMMIT_TASKS_PREFIX + record.connector, _json({"tasks": record.tasks})
    if isinstance(record, TargetStateRecord):
        if record.state is None:
            return TARGET_STATE_PREFIX + record.connector, None
        legacy = TargetState.PAUSED if record.state is TargetState.STOPPED else record.state
        return TARGET_STATE_PREFIX + record.connector, _json(
            {"state": legacy.value, "state.v2": record.state.value}
        )
    if isinstance(record, TaskCountRecord):
        return TASK_COUNT_RECORD_PREFIX + record.connector, _json({"task-count": record.task_count})
    if isinstance(record, SessionKeyRecord):
        return SESSION_KEY_KEY, _json(
            {
                "key": base64.b64encode(record.key).decode("ascii"),
                "algorithm": record.algorithm,
                "creation-timestamp": record.creation_timestamp,
            }
        )
    if isinstance(record, RestartRequestRecord):
        return RESTART_PREFIX + record.connector, _json(
            {"include-tasks": record.include_tasks, "only-failed": record.only_failed}
        )
    return LOGGER_CLUSTER_PREFIX + record.namespace, _json({"level": record.level})


def parse_task_key(key: str) -> tuple[str, int] | None:
    """``task-<connector>-<n>`` -> (connector, n); connector names may contain dashes."""
    parts = key.split("-")
    if len(parts) < 3 or parts[0] != "task":
        return None
    try:
        task = int(parts[-1])
    except ValueError:
        return None
    return "-".join(parts[1:-1]), task


def _field(value: dict[str, Any], name: str, kind: type | tuple[type, ...], key: str) -> Any:
    found = value.get(name)
    if not isinstance(found, kind) or (kind is int and isinstance(found, bool)):
        raise DataException(
            f"Invalid data for config record {key}: '{name}' is {type(found).__name__}"
        )
    return found


def decode(key: str | bytes, value: bytes | None) -> ConfigRecord:
    """Parse one record of the config topic; raises :class:`DataException` for a key
    or value in an unexpected format (Kafka logs and skips those)."""
    if isinstance(key, bytes):
        key = key.decode("utf-8")
    body: dict[str, Any] | None = None
    if value is not None:
        try:
            parsed = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataException(f"Invalid JSON in config record {key}: {exc}") from exc
        if not isinstance(parsed, dict):
            raise DataException(f"Config record {key} is not a JSON object")
        body = parsed

    if key.startswith(TARGET_STATE_PREFIX):
        connector = key[len(TARGET_STATE_PREFIX) :]
        if body is None:
            return TargetStateRecord(connector, None)
        raw = body.get("state.v2") if isinstance(body.get("state.v2"), str) else body.get("state")
        try:
            return TargetStateRecord(connector, TargetState(raw))
        except ValueError:
            raise DataException(
                f"Invalid target state for connector '{connector}': {raw!r}"
            ) from None
    if key.startswith(CONNECTOR_PREFIX):
        connector = key[len(CONNECTOR_PREFIX) :]
        if body is None:
            return ConnectorConfigRecord(connector, None)
        return ConnectorConfigRecord(connector, dict(_field(body, "properties", dict, key)))
    if key.startswith(TASK_PREFIX):
        parsed_key = parse_task_key(key)
        if parsed_key is None:
            raise DataException(
                f"Ignoring task configuration because {key} couldn't be parsed as a task config key"
            )
        properties = None if body is None else dict(_field(body, "properties", dict, key))
        return TaskConfigRecord(parsed_key[0], parsed_key[1], properties)
    if key.startswith(COMMIT_TASKS_PREFIX):
        if body is None:
            raise DataException(f"Ignoring tombstone for task commit record {key}")
        return TaskCommitRecord(key[len(COMMIT_TASKS_PREFIX) :], _field(body, "tasks", int, key))
    if key.startswith(RESTART_PREFIX):
        connector = key[len(RESTART_PREFIX) :]
        if body is None:
            raise DataException(f"Ignoring tombstone for restart request {key}")
        include = body.get("include-tasks", False)
        only_failed = body.get("only-failed", False)
        if not isinstance(include, bool) or not isinstance(only_failed, bool):
            raise DataException(f"Invalid restart request {key}")
        return RestartRequestRecord(connector, include, only_failed)
    if key.startswith(TASK_COUNT_RECORD_PREFIX):
        if body is None:
            raise DataException(f"Ignoring tombstone for task count record {key}")
        return TaskCountRecord(
            key[len(TASK_COUNT_RECORD_PREFIX) :], _field(body, "task-count", int, key)
        )
    if key == SESSION_KEY_KEY:
        if body is None:
            raise DataException("Ignoring tombstone for the session key")
        return SessionKeyRecord(
            base64.b64decode(_field(body, "key", str, key)),
            _field(body, "algorithm", str, key),
            _field(body, "creation-timestamp", int, key),
        )
    if key.startswith(LOGGER_CLUSTER_PREFIX):
        if body is None:
            raise DataException(f"Ignoring tombstone for logger level {key}")
        return LoggerLevelRecord(key[len(LOGGER_CLUSTER_PREFIX) :], _field(body, "level", str, key))
    raise DataException(f"Discarding config update record with invalid key: {key}")


def task_config_records(connector: str, configs: list[dict[str, str]]) -> list[ConfigRecord]:
    """What the leader writes for new task configs: one record per task, then the
    commit that makes them live (readers apply them only on the commit)."""
    records: list[ConfigRecord] = [
        TaskConfigRecord(connector, i, config) for i, config in enumerate(configs)
    ]
    records.append(TaskCommitRecord(connector, len(configs)))
    return records


def connector_removal_records(connector: str) -> list[ConfigRecord]:
    """What deleting a connector writes: tombstones for its config and target state."""
    return [ConnectorConfigRecord(connector, None), TargetStateRecord(connector, None)]
