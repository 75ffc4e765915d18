"""Connector and task statuses as read from the status topic, and the REST views of them.

Every worker writes the statuses of what it runs. Two workers can briefly both think
they own a task (around a rebalance), so a "safe" write is only made when nothing is
stored yet, the stored status came from the same worker, or the writer's group
generation is newer (Kafka's ``putSafe``). Readers take the last record, and a
tombstone removes the entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oncelog.connect.storage.status_records import (
    ConnectorStatus,
    State,
    StatusRecord,
    StatusTombstone,
    TaskStatus,
    TopicStatus,
)


def _state_json(state: State, worker_id: str, trace: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"state": state.value, "worker_id": worker_id}
    if trace is not None:
        out["trace"] = trace
    return out


@dataclass
class StatusState:
    connectors: dict[str, ConnectorStatus] = field(default_factory=dict)
    tasks: dict[tuple[str, int], TaskStatus] = field(default_factory=dict)
    topics: dict[str, dict[str, TopicStatus]] = field(default_factory=dict)

    def apply(self, record: StatusRecord) -> None:
        if isinstance(record, ConnectorStatus):
            self.connectors[record.connector] = record
        elif isinstance(record, TaskStatus):
            self.tasks[(record.connector, record.task)] = record
        elif isinstance(record, TopicStatus):
            self.topics.setdefault(record.connector, {})[record.topic] = record
        elif record.topic is not None:
            self.topics.get(record.connector, {}).pop(record.topic, None)
        elif record.task is not None:
            self.tasks.pop((record.connector, record.task), None)
        else:
            self.connectors.pop(record.connector, None)

    def can_write_safely(self, status: ConnectorStatus | TaskStatus) -> bool:
        """Kafka's ``putSafe`` rule for overwriting the stored status."""
        current: ConnectorStatus | TaskStatus | None
        if isinstance(status, ConnectorStatus):
            current = self.connectors.get(status.connector)
        else:
            current = self.tasks.get((status.connector, status.task))
        return (
            current is None
            or current.worker_id == status.worker_id
            or status.generation > current.generation
        )

    def remove_connector(self, connector: str) -> list[StatusTombstone]:
        """Tombstones for a deleted connector and its tasks (what to write)."""
        out = [StatusTombstone(connector)]
        out += [
            StatusTombstone(connector, task) for (c, task) in sorted(self.tasks) if c == connector
        ]
        return out

    def connector_status_json(
        self, connector: str, connector_type: str | None
    ) -> dict[str, Any] | None:
        """``GET /connectors/{c}/status``: None when no status is stored."""
        status = self.connectors.get(connector)
        if status is None:
            return None
        tasks = sorted(
            (t for (c, _), t in self.tasks.items() if c == connector), key=lambda t: t.task
        )
        out: dict[str, Any] = {
            "name": connector,
            "connector": _state_json(status.state, status.worker_id, status.trace),
            "tasks": [{"id": t.task, **_state_json(t.state, t.worker_id, t.trace)} for t in tasks],
        }
        if connector_type is not None:
            out["type"] = connector_type
        return out

    def task_status_json(self, connector: str, task: int) -> dict[str, Any] | None:
        """``GET /connectors/{c}/tasks/{t}/status``."""
        status = self.tasks.get((connector, task))
        if status is None:
            return None
        return {"id": task, **_state_json(status.state, status.worker_id, status.trace)}

    def active_topics_json(self, connector: str) -> dict[str, Any]:
        """``GET /connectors/{c}/topics``."""
        return {connector: {"topics": sorted(self.topics.get(connector, {}))}}
