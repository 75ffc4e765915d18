"""KIP-618 zombie fencing: when a round of fencing is needed, whom it fences, and the
names involved. Pure decisions; the herder carries them out.

Task-count records (``tasks-fencing-<name>``, ``{"task-count": n}``) in the config topic
say how many task producers the last fenced generation of a connector had. When the
latest task-count record comes after the connector's latest task configs (``commit-``
record), its tasks may start; otherwise (the connector is *pending fencing*) the leader
first fences every producer of the previous generation, then writes a new task-count
record. No fencing is needed, only the record, when:

- the connector has no task-count record yet: no transactional task producer was ever
  started for it;
- the last record says one task and the new generation has one task: the new task's
  producer has the same transactional id and fences its predecessor itself (Kafka's
  shortcut for single-task connectors such as CDC sources). This does not hold for
  multi-task connectors even with an unchanged count: source partitions may move between
  tasks.

Transactional ids: task producers use ``<group>-<connector>-<task>``; the leader's
config-topic producer uses ``connect-cluster-<group>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.client_configs import transactional_id
from oncelog.connect.runtime.work import Work, configured_work
from oncelog.connect.runtime.worker_config import (  # noqa: F401 - re-exported for callers
    ExactlyOnceSourceSupport,
    exactly_once_source_support,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot


def leader_transactional_id(group_id: str) -> str:
    return f"connect-cluster-{group_id}"


def task_transactional_id(group_id: str, connector: str, task: int) -> str:
    return transactional_id(group_id, connector, task)


@dataclass(frozen=True)
class FencingRound:
    """What the leader does for a connector pending fencing: fence ``fence_ids`` (maybe
    none), then write a task-count record of ``task_count``, unless the connector's task
    configs moved past ``generation`` meanwhile."""

    connector: str
    fence_ids: tuple[str, ...]
    task_count: int
    generation: int


def fencing_round(
    snapshot: ClusterConfigSnapshot, group_id: str, connector: str
) -> FencingRound | None:
    """The round of fencing ``connector`` needs; None when a task-count record already
    follows its latest task configs."""
    if connector not in snapshot.pending_fencing:
        return None
    task_count = snapshot.task_counts.get(connector, 0)
    previous = snapshot.task_count_records.get(connector)
    if previous is None or (previous == 1 and task_count == 1):
        fence_ids: tuple[str, ...] = ()
    else:
        fence_ids = tuple(task_transactional_id(group_id, connector, t) for t in range(previous))
    return FencingRound(
        connector, fence_ids, task_count, snapshot.task_config_generations.get(connector, -1)
    )


def may_start_task(snapshot: ClusterConfigSnapshot, connector: str, generation: int) -> bool:
    """A source task of ``generation`` may start (startup step 3): its generation is still
    the latest, and a task-count record follows it."""
    return (
        connector not in snapshot.pending_fencing
        and snapshot.task_config_generations.get(connector, -1) == generation
    )


STALE_CONFIGURATION = (
    "Cannot complete request momentarily due to stale configuration (typically caused by a "
    "concurrent config change)"
)


def restart_refusal(
    snapshot: ClusterConfigSnapshot,
    task: ConnectorTaskId,
    configured_at_assignment: Work,
    rejoin_pending: bool,
) -> ConnectRestException | None:
    """Why an exactly-once source task may not restart on a view of the config topic just
    read to its end (KIP-618): 404 when its connector or the task is gone, 409 when what
    was read calls for a rebalance first. None: restart it."""
    if not snapshot.contains(task.connector):
        return ConnectRestException(404, f"Unknown connector: {task.connector}")
    if task not in snapshot.tasks(task.connector):
        return ConnectRestException(404, f"Unknown task: {task}")
    configured = configured_work(snapshot.task_counts_by_connector())
    if rejoin_pending or configured != configured_at_assignment:
        return ConnectRestException(409, STALE_CONFIGURATION)
    return None
