"""What ``POST /connectors/{c}/restart?includeTasks=&onlyFailed=`` restarts (KIP-745),
Kafka Connect's ``RestartPlan``: decided from the stored statuses, carried out by the
worker that runs each piece."""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.connect.storage.status_records import State
from oncelog.connect.storage.status_state import StatusState


@dataclass(frozen=True)
class RestartPlan:
    """What ``POST /connectors/{c}/restart?includeTasks=&onlyFailed=`` restarts (KIP-745)."""

    connector: str
    restart_connector: bool
    tasks: tuple[int, ...]

    def is_empty(self) -> bool:
        return not self.restart_connector and not self.tasks


def restart_plan(
    statuses: StatusState, connector: str, include_tasks: bool, only_failed: bool
) -> RestartPlan:
    status = statuses.connectors.get(connector)
    restart_connector = not only_failed or (status is not None and status.state is State.FAILED)
    tasks: list[int] = []
    if include_tasks:
        for (name, task), task_status in sorted(statuses.tasks.items()):
            if name == connector and (not only_failed or task_status.state is State.FAILED):
                tasks.append(task)
    return RestartPlan(connector, restart_connector, tuple(tasks))
