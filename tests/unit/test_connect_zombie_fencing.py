"""KIP-618 zombie fencing decisions: when the leader fences, whom, and when a source
task may start; Kafka's answers to badly signed internal requests; exactly-once tasks
restart on a new task-config generation."""

from __future__ import annotations

import pytest

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed import request_signing
from oncelog.connect.distributed.zombie_fencing import (
    STALE_CONFIGURATION,
    ExactlyOnceSourceSupport,
    FencingRound,
    exactly_once_source_support,
    fencing_round,
    leader_transactional_id,
    may_start_task,
    restart_refusal,
    task_transactional_id,
)
from oncelog.connect.runtime.work import Work
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.runtime.worker_plan import LocalState, RunningTask, plan
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    TaskCountRecord,
    task_config_records,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigState

GROUP = "g"


def _snapshot(*records: object) -> ClusterConfigSnapshot:
    state = ConfigState()
    for record in records:
        state.apply(state.offset, record)  # type: ignore[arg-type]
    return state.snapshot()


def _tasks(n: int) -> list[object]:
    return list(task_config_records("src", [{"n": str(i)} for i in range(n)]))


CONNECTOR = ConnectorConfigRecord("src", {"connector.class": "VerifiableSource"})


def test_names() -> None:
    assert leader_transactional_id("cluster") == "connect-cluster-cluster"
    assert task_transactional_id("cluster", "my-src", 2) == "cluster-my-src-2"


def test_first_generation_needs_only_a_task_count_record() -> None:
    snapshot = _snapshot(CONNECTOR, *_tasks(3))
    assert fencing_round(snapshot, GROUP, "src") == FencingRound("src", (), 3, 0)
    assert not may_start_task(snapshot, "src", 0)


def test_a_record_after_the_latest_task_configs_means_no_fencing() -> None:
    snapshot = _snapshot(CONNECTOR, *_tasks(3), TaskCountRecord("src", 3))
    assert fencing_round(snapshot, GROUP, "src") is None
    assert may_start_task(snapshot, "src", 0)
    assert not may_start_task(snapshot, "src", 1)  # a task of another generation


def test_a_record_before_the_latest_task_configs_fences_its_count() -> None:
    # offset order as in the seed: tasks-fencing, task-*, commit -> fencing needed.
    snapshot = _snapshot(CONNECTOR, *_tasks(3), TaskCountRecord("src", 3), *_tasks(1))
    assert fencing_round(snapshot, GROUP, "src") == FencingRound(
        "src", ("g-src-0", "g-src-1", "g-src-2"), 1, 1
    )
    assert not may_start_task(snapshot, "src", 1)
    # 1 -> 3: the single old task is fenced too, the new generation has more than one.
    snapshot = _snapshot(
        CONNECTOR, *_tasks(3), TaskCountRecord("src", 3), *_tasks(1), TaskCountRecord("src", 1),
        *_tasks(3),
    )  # fmt: skip
    assert fencing_round(snapshot, GROUP, "src") == FencingRound("src", ("g-src-0",), 3, 2)


def test_single_task_shortcut_only_from_one_to_one() -> None:
    one_to_one = _snapshot(CONNECTOR, *_tasks(1), TaskCountRecord("src", 1), *_tasks(1))
    assert fencing_round(one_to_one, GROUP, "src") == FencingRound("src", (), 1, 1)
    # An unchanged count above one still fences: source partitions may move between tasks.
    two_to_two = _snapshot(CONNECTOR, *_tasks(2), TaskCountRecord("src", 2), *_tasks(2))
    assert fencing_round(two_to_two, GROUP, "src") == FencingRound(
        "src", ("g-src-0", "g-src-1"), 2, 1
    )


def test_unknown_connector_or_other_connectors_need_nothing() -> None:
    snapshot = _snapshot(CONNECTOR, *_tasks(2))
    assert fencing_round(snapshot, GROUP, "other") is None


@pytest.mark.parametrize(
    ("value", "mode", "transactional_leader", "enabled"),
    [
        ("disabled", ExactlyOnceSourceSupport.DISABLED, False, False),
        ("preparing", ExactlyOnceSourceSupport.PREPARING, True, False),
        ("ENABLED", ExactlyOnceSourceSupport.ENABLED, True, True),
    ],
)
def test_worker_setting(
    value: str, mode: object, transactional_leader: bool, enabled: bool
) -> None:
    config = WorkerConfig(
        {
            "bootstrap.servers": "x:1",
            "group.id": GROUP,
            "config.storage.topic": "c",
            "offset.storage.topic": "o",
            "status.storage.topic": "s",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "exactly.once.source.support": value,
        }
    )
    support = exactly_once_source_support(config)
    assert support is mode
    assert support.transactional_leader is transactional_leader
    assert support.enabled is enabled


def test_internal_request_refusals_use_kafkas_status_codes() -> None:
    key, body = b"k" * 32, b""
    accepted = ["HmacSHA256"]
    assert request_signing.refusal(key, body, {}, accepted) == (
        400,
        "Internal request missing required signature",
    )
    status, message = request_signing.refusal(
        key, body, request_signing.sign(key, body, "HmacSHA512"), accepted
    ) or (0, "")
    assert status == 400 and "does not support the 'HmacSHA512' key signing algorithm" in message
    assert request_signing.refusal(None, body, request_signing.sign(key, body), accepted) == (
        503,
        "This worker is still starting up and has not been able to read a session key from "
        "the config topic yet",
    )
    assert request_signing.refusal(b"x" * 32, body, request_signing.sign(key, body), accepted) == (
        403,
        "Internal request contained invalid signature.",
    )
    assert request_signing.refusal(key, body, request_signing.sign(key, body), accepted) is None


def test_exactly_once_tasks_restart_on_a_new_generation_with_unchanged_configs() -> None:
    t0 = ConnectorTaskId("src", 0)
    snapshot = _snapshot(CONNECTOR, *_tasks(1), TaskCountRecord("src", 1), *_tasks(1))
    owned = Work.of([], [t0])
    config = {"n": "0"}
    # Started for generation 0; the configs are the same but the generation is 1.
    stale = LocalState({}, {t0: RunningTask(TargetState.STARTED, config, 0)})
    steps = plan(owned, snapshot, stale)
    assert steps.stop_tasks == (t0,) and steps.start_tasks == ((t0, TargetState.STARTED),)
    current = LocalState({}, {t0: RunningTask(TargetState.STARTED, config, 1)})
    assert plan(owned, snapshot, current).is_empty()
    # Tasks without a generation (at-least-once) keep running as before.
    plain = LocalState({}, {t0: RunningTask(TargetState.STARTED, config)})
    assert plan(owned, snapshot, plain).is_empty()


def test_restart_refusals_after_reading_the_config_topic() -> None:
    t1 = ConnectorTaskId("src", 1)
    snapshot = _snapshot(CONNECTOR, *_tasks(2), TaskCountRecord("src", 2))
    assigned = Work.of(["src"], [ConnectorTaskId("src", 0), t1])
    assert restart_refusal(snapshot, t1, assigned, rejoin_pending=False) is None
    # The connector was reconfigured to one task: task 1 is gone.
    fewer = _snapshot(CONNECTOR, *_tasks(2), TaskCountRecord("src", 2), *_tasks(1))
    refusal = restart_refusal(fewer, t1, assigned, rejoin_pending=False)
    assert refusal is not None and (refusal.status, str(refusal)) == (404, "Unknown task: src-1")
    gone = _snapshot(CONNECTOR, *_tasks(2), ConnectorConfigRecord("src", None))
    refusal = restart_refusal(gone, t1, assigned, rejoin_pending=False)
    assert refusal is not None and (refusal.status, str(refusal)) == (
        404,
        "Unknown connector: src",
    )
    # More tasks than at the last assignment: a rebalance comes first.
    more = _snapshot(CONNECTOR, *_tasks(2), TaskCountRecord("src", 2), *_tasks(3))
    refusal = restart_refusal(more, t1, assigned, rejoin_pending=False)
    assert refusal is not None and (refusal.status, str(refusal)) == (409, STALE_CONFIGURATION)
    refusal = restart_refusal(snapshot, t1, assigned, rejoin_pending=True)
    assert refusal is not None and refusal.status == 409
