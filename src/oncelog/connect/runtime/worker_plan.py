"""What a worker must start, stop or move to another target state, from what it owns
(its assignment), what the config topic says and what it runs now. Pure: the herder
calls it after every rebalance and config change and carries out the plan.

- Connectors and tasks it no longer owns, or that were deleted, stop.
- A task whose stored config changed (the connector was reconfigured) restarts with
  the new config. A task started for one task-config generation (exactly-once source
  tasks, KIP-618) also restarts on a new generation, config changed or not: the
  leader fences the producers of the old generation before the new one starts.
- A connector's target state applies to it and its tasks: PAUSED keeps them running
  but paused, STOPPED stops the tasks and leaves the connector in the stopped state.
- A connector whose task configs are inconsistent runs no tasks until repaired.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.work import Work
from oncelog.connect.runtime.worker import RunningTask
from oncelog.connect.storage.config_state import ClusterConfigSnapshot


@dataclass(frozen=True)
class LocalState:
    connectors: Mapping[str, TargetState] = field(default_factory=dict)
    tasks: Mapping[ConnectorTaskId, RunningTask] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    stop_connectors: tuple[str, ...] = ()
    stop_tasks: tuple[ConnectorTaskId, ...] = ()
    start_connectors: tuple[tuple[str, TargetState], ...] = ()
    start_tasks: tuple[tuple[ConnectorTaskId, TargetState], ...] = ()
    transition_connectors: tuple[tuple[str, TargetState], ...] = ()
    transition_tasks: tuple[tuple[ConnectorTaskId, TargetState], ...] = ()

    def is_empty(self) -> bool:
        return not any(
            (
                self.stop_connectors,
                self.stop_tasks,
                self.start_connectors,
                self.start_tasks,
                self.transition_connectors,
                self.transition_tasks,
            )
        )


def plan(owned: Work, snapshot: ClusterConfigSnapshot, local: LocalState) -> Plan:
    stop_connectors, start_connectors, transition_connectors = [], [], []
    for name in sorted(set(local.connectors) | owned.connectors):
        target = snapshot.target_state(name)
        running = local.connectors.get(name)
        if running is not None and (name not in owned.connectors or target is None):
            stop_connectors.append(name)
        elif running is None and name in owned.connectors and target is not None:
            start_connectors.append((name, target))
        elif running is not None and target is not None and running is not target:
            transition_connectors.append((name, target))

    stop_tasks, start_tasks, transition_tasks = [], [], []
    for task in sorted(set(local.tasks) | owned.tasks):
        target = snapshot.target_state(task.connector)
        live = (
            target is not None
            and target is not TargetState.STOPPED
            and task in snapshot.tasks(task.connector)
        )
        wanted = live and task in owned.tasks
        config = snapshot.task_configs.get(task)
        current = local.tasks.get(task)
        assert target is not None or not wanted
        stale = current is not None and current.generation not in (
            None,
            snapshot.task_config_generations.get(task.connector),
        )
        if current is not None:
            if not wanted or dict(current.config) != config or stale:
                stop_tasks.append(task)
                if wanted and target is not None:
                    start_tasks.append((task, target))  # restart with the new config
            elif target is not None and current.state is not target:
                transition_tasks.append((task, target))
        elif wanted and target is not None:
            start_tasks.append((task, target))

    return Plan(
        tuple(stop_connectors),
        tuple(stop_tasks),
        tuple(start_connectors),
        tuple(start_tasks),
        tuple(transition_connectors),
        tuple(transition_tasks),
    )
