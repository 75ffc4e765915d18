"""The cluster's configuration as read from the config topic, record by record.

A pure state machine: the config-topic reader feeds it each record (in offset
order) and gets back what changed; the herder reads consistent snapshots from it.
Kafka Connect's rules:

- Task configs are staged until their ``commit-<name>`` record, and only applied if
  the staged set holds every task id below the committed count. Otherwise the
  connector is *inconsistent* and runs no tasks until a complete set is committed
  (a leader died half-way through writing them).
- Deleting a connector (tombstone) drops its tasks, staged configs and target state;
  a connector without a target-state record is STARTED.
- KIP-618 bookkeeping, kept now so exactly-once can build on it: each commit bumps
  the connector's task-config generation and marks it as needing a round of zombie
  fencing, until a ``tasks-fencing-<name>`` record follows the commit.
- ``restart-connector-<name>`` records are requests, reported as events only once
  the reader has caught up (older requests were already handled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.storage.config_records import (
    ConfigRecord,
    ConnectorConfigRecord,
    LoggerLevelRecord,
    RestartRequestRecord,
    SessionKeyRecord,
    TargetStateRecord,
    TaskCommitRecord,
    TaskConfigRecord,
    TaskCountRecord,
)


@dataclass(frozen=True)
class ConnectorChanged:
    connector: str  # created, reconfigured or (config None in the snapshot) deleted


@dataclass(frozen=True)
class TasksChanged:
    connector: str
    tasks: tuple[ConnectorTaskId, ...]


@dataclass(frozen=True)
class TargetStateChanged:
    connector: str


@dataclass(frozen=True)
class SessionKeyChanged:
    pass


@dataclass(frozen=True)
class RestartRequested:
    request: RestartRequestRecord


@dataclass(frozen=True)
class LoggerLevelChanged:
    """A cluster-wide log level (KIP-976), written after this worker caught up."""

    namespace: str
    level: str


ConfigEvent = (
    ConnectorChanged
    | TasksChanged
    | TargetStateChanged
    | SessionKeyChanged
    | RestartRequested
    | LoggerLevelChanged
)


@dataclass(frozen=True)
class ClusterConfigSnapshot:
    """An immutable view of the config topic up to ``offset`` (the next offset to read)."""

    offset: int
    connector_configs: dict[str, dict[str, str]]
    task_configs: dict[ConnectorTaskId, dict[str, str]]
    task_counts: dict[str, int]
    target_states: dict[str, TargetState]
    inconsistent: frozenset[str]
    session_key: SessionKeyRecord | None
    task_count_records: dict[str, int]
    task_config_generations: dict[str, int]
    pending_fencing: frozenset[str]

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def contains(self, connector: str) -> bool:
        return connector in self.connector_configs

    def tasks(self, connector: str) -> list[ConnectorTaskId]:
        """The connector's tasks, or none while its task configs are inconsistent."""
        if connector in self.inconsistent:
            return []
        return [ConnectorTaskId(connector, i) for i in range(self.task_counts.get(connector, 0))]

    def target_state(self, connector: str) -> TargetState | None:
        return self.target_states.get(connector) if connector in self.connector_configs else None

    def task_counts_by_connector(self) -> dict[str, int]:
        """Committed task counts of the live, consistent connectors (the assignor's input)."""
        return {c: len(self.tasks(c)) for c in self.connector_configs}


@dataclass
class ConfigState:
    offset: int = 0
    caught_up: bool = False  # set by the reader once it reached the end at start
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    task_configs: dict[ConnectorTaskId, dict[str, str]] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)
    target_states: dict[str, TargetState] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    deferred: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)
    session_key: SessionKeyRecord | None = None
    task_count_records: dict[str, int] = field(default_factory=dict)
    task_config_generations: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)
    logger_levels: dict[str, str] = field(default_factory=dict)

    def apply(self, offset: int, record: ConfigRecord) -> list[ConfigEvent]:
        """Apply the record read at ``offset``; returns what changed."""
        self.offset = offset + 1
        if isinstance(record, ConnectorConfigRecord):
            return self._connector(record)
        if isinstance(record, TaskConfigRecord):
            if record.properties is not None:
                self.deferred.setdefault(record.connector, {})[record.task] = dict(
                    record.properties
                )
            return []
        if isinstance(record, TaskCommitRecord):
            return self._commit(record)
        if isinstance(record, TargetStateRecord):
            return self._target_state(record)
        if isinstance(record, TaskCountRecord):
            self.task_count_records[record.connector] = record.task_count
            self.pending_fencing.discard(record.connector)
            return []
        if isinstance(record, SessionKeyRecord):
            self.session_key = record
            return [SessionKeyChanged()]
        if isinstance(record, RestartRequestRecord):
            return [RestartRequested(record)] if self.caught_up else []
        if isinstance(record, LoggerLevelRecord):
            self.logger_levels[record.namespace] = record.level
            return [LoggerLevelChanged(record.namespace, record.level)] if self.caught_up else []
        return []

    def _connector(self, record: ConnectorConfigRecord) -> list[ConfigEvent]:
        name = record.connector
        if record.properties is None:
            self.connector_configs.pop(name, None)
            self.target_states.pop(name, None)
            self.task_counts.pop(name, None)
            self.deferred.pop(name, None)
            self.inconsistent.discard(name)
            for task in [t for t in self.task_configs if t.connector == name]:
                del self.task_configs[task]
        else:
            self.connector_configs[name] = dict(record.properties)
            self.target_states.setdefault(name, TargetState.STARTED)
        return [ConnectorChanged(name)]

    def _commit(self, record: TaskCommitRecord) -> list[ConfigEvent]:
        name, count = record.connector, record.tasks
        staged = self.deferred.pop(name, {})
        events: list[ConfigEvent] = []
        if all(i in staged for i in range(count)):
            for task in [t for t in self.task_configs if t.connector == name]:
                del self.task_configs[task]
            for i in range(count):
                self.task_configs[ConnectorTaskId(name, i)] = staged[i]
            self.inconsistent.discard(name)
            self.task_config_generations[name] = self.task_config_generations.get(name, -1) + 1
            events.append(TasksChanged(name, tuple(ConnectorTaskId(name, i) for i in range(count))))
        else:
            # Staged configs are dropped either way: the next commit needs a complete fresh set.
            self.inconsistent.add(name)
        self.task_counts[name] = count
        self.pending_fencing.add(name)
        return events

    def _target_state(self, record: TargetStateRecord) -> list[ConfigEvent]:
        name = record.connector
        if record.state is None:
            self.target_states.pop(name, None)
            if name in self.connector_configs:
                self.target_states[name] = TargetState.STARTED
            return [TargetStateChanged(name)]
        previous = self.target_states.get(name)
        self.target_states[name] = record.state
        return [TargetStateChanged(name)] if previous is not record.state else []

    def snapshot(self) -> ClusterConfigSnapshot:
        return ClusterConfigSnapshot(
            offset=self.offset,
            connector_configs={k: dict(v) for k, v in self.connector_configs.items()},
            task_configs={k: dict(v) for k, v in self.task_configs.items()},
            task_counts=dict(self.task_counts),
            target_states=dict(self.target_states),
            inconsistent=frozenset(self.inconsistent),
            session_key=self.session_key,
            task_count_records=dict(self.task_count_records),
            task_config_generations=dict(self.task_config_generations),
            pending_fencing=frozenset(self.pending_fencing),
        )
