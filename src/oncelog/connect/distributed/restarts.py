"""Restarts (KIP-745), carried out by the worker that runs each piece.

``POST /connectors/{c}/restart`` is written to the config topic by the leader as a
restart request; every worker reads it and restarts what it runs of the connector,
per the plan decided from the stored statuses (``restart_plan``), reporting RESTARTING
first. ``POST /connectors/{c}/tasks/{t}/restart`` is served by the worker running the
task. An exactly-once source task restarts only on an up-to-date view (KIP-618): the
config topic is read to its end first (500 if that fails), a task that no longer
exists is 404, and new configs that call for a rebalance are 409
(``zombie_fencing.restart_refusal``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.connect.api.errors import ConnectException, ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed import zombie_fencing
from oncelog.connect.distributed.errors import NotAssignedError
from oncelog.connect.runtime.restart_plan import restart_plan
from oncelog.connect.storage.config_records import RestartRequestRecord
from oncelog.connect.storage.config_state import ClusterConfigSnapshot
from oncelog.connect.storage.status_records import ConnectorStatus, State, TaskStatus

if TYPE_CHECKING:
    from oncelog.connect.distributed.herder import Herder


class Restarts:
    def __init__(self, herder: Herder) -> None:
        self.herder = herder

    def carry_out(self, request: RestartRequestRecord) -> None:
        """A restart request read from the config topic (herder thread)."""
        herder, worker = self.herder, self.herder.worker
        snapshot = herder.configs.snapshot()
        name = request.connector
        if not snapshot.contains(name):
            return
        steps = restart_plan(
            herder.statuses.state, name, request.include_tasks, request.only_failed
        )
        targets = worker.connector_targets()
        if steps.restart_connector and name in targets:
            worker.statuses.put(
                ConnectorStatus(name, State.RESTARTING, herder.worker_id, herder.member.generation)
            )
            herder._stop_connector(name)
            herder._start_connector(name, snapshot.connector_configs[name], targets[name])
        for number in steps.tasks:
            task = ConnectorTaskId(name, number)
            if self._held_here(task) and task in snapshot.task_configs:
                worker.statuses.put(
                    TaskStatus(
                        name, number, State.RESTARTING, herder.worker_id, herder.member.generation
                    )
                )
                self._restart(task, snapshot)

    def restart_task(self, task: ConnectorTaskId) -> None:
        """``POST /connectors/{c}/tasks/{t}/restart`` on the herder thread: restart a task
        running here; :class:`NotAssignedError` names its owner otherwise."""
        herder = self.herder
        snapshot = herder.configs.snapshot()
        if herder.exactly_once and herder._is_source(
            snapshot.connector_configs.get(task.connector, {})
        ):
            snapshot = self._fresh_snapshot(task)
        if task not in snapshot.task_configs:
            raise ConnectRestException(404, f"Task {task} not found")
        if not self._held_here(task):
            status = herder.statuses.state.tasks.get((task.connector, task.task))
            owner = status.worker_id if status is not None and status.worker_id else None
            if owner == herder.worker_id:
                owner = None
            raise NotAssignedError(None if owner is None else f"http://{owner}", f"Task {task}")
        self._restart(task, snapshot)

    def _held_here(self, task: ConnectorTaskId) -> bool:
        return task in self.herder.worker.tasks or task in self.herder.fenced_starts.reserved

    def _restart(self, task: ConnectorTaskId, snapshot: ClusterConfigSnapshot) -> None:
        herder = self.herder
        target = snapshot.target_state(task.connector) or TargetState.STARTED
        herder.worker.stop_task(task)
        herder.fenced_starts.forget(task)
        herder._start_task(
            task, snapshot.connector_configs[task.connector], snapshot.task_configs[task], target
        )

    def _fresh_snapshot(self, task: ConnectorTaskId) -> ClusterConfigSnapshot:
        herder = self.herder
        try:
            herder.configs.read_to_end()
        except ConnectException as exc:
            raise ConnectRestException(
                500,
                f"Failed to read to the end of the config topic before restarting {task}: {exc}",
            ) from exc
        snapshot = herder.configs.snapshot()
        refused = zombie_fencing.restart_refusal(
            snapshot, task, herder.group.configured_at_assignment, herder.group.need_rejoin
        )
        if refused is not None:
            raise refused
        return snapshot
