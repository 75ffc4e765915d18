"""What a worker starts, stops and transitions after rebalances and config changes."""

from __future__ import annotations

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.work import Work
from oncelog.connect.runtime.worker_plan import LocalState, Plan, RunningTask, plan
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    TargetStateRecord,
    TaskCommitRecord,
    TaskConfigRecord,
    task_config_records,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigState

STARTED, PAUSED, STOPPED = TargetState.STARTED, TargetState.PAUSED, TargetState.STOPPED


def T(connector: str, task: int) -> ConnectorTaskId:
    return ConnectorTaskId(connector, task)


def _snapshot(*records: object) -> ClusterConfigSnapshot:
    state = ConfigState()
    for record in records:
        state.apply(state.offset, record)  # type: ignore[arg-type]
    return state.snapshot()


BASE = [
    ConnectorConfigRecord("a", {"connector.class": "X"}),
    *task_config_records("a", [{"n": "0"}, {"n": "1"}]),
    ConnectorConfigRecord("b", {"connector.class": "Y"}),
    *task_config_records("b", [{"n": "0"}]),
]


def test_fresh_assignment_starts_everything_owned() -> None:
    owned = Work.of(["a"], [T("a", 0), T("b", 0)])
    assert plan(owned, _snapshot(*BASE), LocalState()) == Plan(
        start_connectors=(("a", STARTED),), start_tasks=((T("a", 0), STARTED), (T("b", 0), STARTED))
    )


def test_revoked_deleted_and_reconfigured_work() -> None:
    local = LocalState(
        {"a": STARTED, "b": STARTED},
        {T("a", 0): RunningTask(STARTED, {"n": "0"}), T("a", 1): RunningTask(STARTED, {"n": "1"}),
         T("b", 0): RunningTask(STARTED, {"n": "0"})},
    )  # fmt: skip
    snapshot = _snapshot(
        *BASE,
        ConnectorConfigRecord("b", None),  # b deleted
        TaskConfigRecord("a", 0, {"n": "0-new"}),  # a reconfigured to one task
        TaskCommitRecord("a", 1),
    )
    owned = Work.of(["a", "b"], [T("a", 0), T("a", 1), T("b", 0)])
    assert plan(owned, snapshot, local) == Plan(
        stop_connectors=("b",),
        stop_tasks=(T("a", 0), T("a", 1), T("b", 0)),
        start_tasks=((T("a", 0), STARTED),),
    )
    # Revoked by the leader: stopped even though configured.
    assert plan(Work.of([], [T("a", 1)]), _snapshot(*BASE), local) == Plan(
        stop_connectors=("a", "b"), stop_tasks=(T("a", 0), T("b", 0))
    )


def test_target_states() -> None:
    local = LocalState({"a": STARTED}, {T("a", 0): RunningTask(STARTED, {"n": "0"})})
    owned = Work.of(["a"], [T("a", 0), T("a", 1)])
    paused = _snapshot(*BASE, TargetStateRecord("a", PAUSED))
    assert plan(owned, paused, local) == Plan(
        start_tasks=((T("a", 1), PAUSED),),
        transition_connectors=(("a", PAUSED),),
        transition_tasks=((T("a", 0), PAUSED),),
    )
    stopped = _snapshot(*BASE, TargetStateRecord("a", STOPPED))
    assert plan(owned, stopped, local) == Plan(
        stop_tasks=(T("a", 0),), transition_connectors=(("a", STOPPED),)
    )
    steady = LocalState(
        {"a": STARTED},
        {T("a", 0): RunningTask(STARTED, {"n": "0"}), T("a", 1): RunningTask(STARTED, {"n": "1"})},
    )
    assert plan(owned, _snapshot(*BASE), steady).is_empty()


def test_inconsistent_connector_runs_no_tasks() -> None:
    snapshot = _snapshot(*BASE, TaskConfigRecord("a", 0, {"n": "x"}), TaskCommitRecord("a", 2))
    assert snapshot.inconsistent == {"a"}
    local = LocalState({"a": STARTED}, {T("a", 0): RunningTask(STARTED, {"n": "0"})})
    assert plan(Work.of(["a"], [T("a", 0), T("a", 1)]), snapshot, local) == Plan(
        stop_tasks=(T("a", 0),)
    )
