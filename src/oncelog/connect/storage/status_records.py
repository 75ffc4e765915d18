"""Records of the status topic, keyed and encoded as Kafka Connect writes them.

- ``status-connector-<name>`` and ``status-task-<name>-<n>``:
  ``{"state":…,"trace":…|null,"worker_id":…,"generation":n}``; a tombstone means the
  connector or task was destroyed.
- ``status-topic-<topic>:connector-<name>`` (KIP-558, the topics a connector used):
  ``{"topic":{"name":…,"connector":…,"task":n,"discoverTimestamp":ms}}``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from oncelog.connect.api.errors import DataException

TASK_STATUS_PREFIX = "status-task-"
CONNECTOR_STATUS_PREFIX = "status-connector-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"


class State(enum.Enum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"
    DESTROYED = "DESTROYED"  # never stored: written as a tombstone


@dataclass(frozen=True)
class ConnectorStatus:
    connector: str
    state: State
    worker_id: str
    generation: int
    trace: str | None = None


@dataclass(frozen=True)
class TaskStatus:
    connector: str
    task: int
    state: State
    worker_id: str
    generation: int
    trace: str | None = None


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    connector: str
    task: int
    discover_timestamp: int


@dataclass(frozen=True)
class StatusTombstone:
    """A destroyed connector or task (``task`` None for the connector), or a topic
    no longer tracked (``topic`` set)."""

    connector: str
    task: int | None = None
    topic: str | None = None


StatusRecord = ConnectorStatus | TaskStatus | TopicStatus | StatusTombstone


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _status_value(state: State, trace: str | None, worker_id: str, generation: int) -> bytes | None:
    if state is State.DESTROYED:
        return None
    return _json(
        {"state": state.value, "trace": trace, "worker_id": worker_id, "generation": generation}
    )


def encode(record: StatusRecord) -> tuple[str, bytes | None]:
    if isinstance(record, ConnectorStatus):
        return CONNECTOR_STATUS_PREFIX + record.connector, _status_value(
            record.state, record.trace, record.worker_id, record.generation
        )
    if isinstance(record, TaskStatus):
        return f"{TASK_STATUS_PREFIX}{record.connector}-{record.task}", _status_value(
            record.state, record.trace, record.worker_id, record.generation
        )
    if isinstance(record, TopicStatus):
        return (
            f"{TOPIC_STATUS_PREFIX}{record.topic}{TOPIC_STATUS_SEPARATOR}{record.connector}",
            _json(
                {
                    "topic": {
                        "name": record.topic,
                        "connector": record.connector,
                        "task": record.task,
                        "discoverTimestamp": record.discover_timestamp,
                    }
                }
            ),
        )
    if record.topic is not None:
        return (
            f"{TOPIC_STATUS_PREFIX}{record.topic}{TOPIC_STATUS_SEPARATOR}{record.connector}",
            None,
        )
    if record.task is not None:
        return f"{TASK_STATUS_PREFIX}{record.connector}-{record.task}", None
    return CONNECTOR_STATUS_PREFIX + record.connector, None


def _status_fields(key: str, value: bytes) -> tuple[State, str | None, str, int]:
    try:
        body = json.loads(value)
        state = State(body["state"])
        trace = body.get("trace")
        worker_id = body["worker_id"]
        generation = body["generation"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataException(f"Failed to deserialize status record {key}: {exc}") from exc
    if (
        not isinstance(worker_id, str)
        or not isinstance(generation, int)
        or not isinstance(trace, str | None)
    ):
        raise DataException(f"Failed to deserialize status record {key}: wrong field types")
    return state, trace, worker_id, generation


def decode(key: str | bytes, value: bytes | None) -> StatusRecord:
    if isinstance(key, bytes):
        key = key.decode("utf-8")
    if key.startswith(CONNECTOR_STATUS_PREFIX):
        connector = key[len(CONNECTOR_STATUS_PREFIX) :]
        if value is None:
            return StatusTombstone(connector)
        state, trace, worker_id, generation = _status_fields(key, value)
        return ConnectorStatus(connector, state, worker_id, generation, trace)
    if key.startswith(TASK_STATUS_PREFIX):
        connector, dash, task = key[len(TASK_STATUS_PREFIX) :].rpartition("-")
        if not dash or not task.isdigit():
            raise DataException(f"Invalid task ID in status key {key}")
        if value is None:
            return StatusTombstone(connector, int(task))
        state, trace, worker_id, generation = _status_fields(key, value)
        return TaskStatus(connector, int(task), state, worker_id, generation, trace)
    if key.startswith(TOPIC_STATUS_PREFIX):
        topic, sep, connector = key[len(TOPIC_STATUS_PREFIX) :].partition(TOPIC_STATUS_SEPARATOR)
        if not sep:
            raise DataException(f"Invalid topic status key {key}")
        if value is None:
            return StatusTombstone(connector, topic=topic)
        try:
            inner = json.loads(value)["topic"]
            return TopicStatus(
                inner["name"],
                inner["connector"],
                int(inner["task"]),
                int(inner["discoverTimestamp"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise DataException(f"Failed to deserialize topic status {key}: {exc}") from exc
    raise DataException(f"Discarding record with invalid key from status log: {key}")
