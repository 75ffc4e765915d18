"""What the leader writes: changed or repaired task configs, empty sets for STOPPED
connectors, and session keys when they expire."""

from __future__ import annotations

import os

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.distributed.leader_duties import (
    new_session_key,
    session_key_due,
    task_config_updates,
)
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    SessionKeyRecord,
    TargetStateRecord,
    TaskCommitRecord,
    TaskConfigRecord,
    task_config_records,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot, ConfigState


def _snapshot(*records: object) -> ClusterConfigSnapshot:
    state = ConfigState()
    for record in records:
        state.apply(state.offset, record)  # type: ignore[arg-type]
    return state.snapshot()


BASE = [
    ConnectorConfigRecord("a", {"x": "1"}),
    *task_config_records("a", [{"t": "0"}, {"t": "1"}]),
    ConnectorConfigRecord("b", {}),
]


def test_task_config_updates() -> None:
    snap = _snapshot(*BASE)
    same = {"a": [{"t": "0"}, {"t": "1"}]}
    assert task_config_updates(snap, same) == []
    # b has no tasks yet; a shrinks to one task.
    updates = task_config_updates(snap, {"a": [{"t": "0"}], "b": [{"u": "0"}]})
    assert updates == [
        TaskConfigRecord("a", 0, {"t": "0"}), TaskCommitRecord("a", 1),
        TaskConfigRecord("b", 0, {"u": "0"}), TaskCommitRecord("b", 1),
    ]  # fmt: skip
    # An inconsistent set is rewritten even when the generated configs look the same.
    broken = _snapshot(*BASE, TaskConfigRecord("a", 0, {"t": "0"}), TaskCommitRecord("a", 2))
    assert task_config_updates(broken, same) == [
        *task_config_records("a", [{"t": "0"}, {"t": "1"}])
    ]


def test_stopped_connectors_get_an_empty_task_set_once() -> None:
    stopped = _snapshot(*BASE, TargetStateRecord("a", TargetState.STOPPED))
    assert task_config_updates(stopped, {"a": [{"t": "0"}, {"t": "1"}]}) == [
        TaskCommitRecord("a", 0)
    ]
    after = _snapshot(*BASE, TargetStateRecord("a", TargetState.STOPPED), TaskCommitRecord("a", 0))
    assert after.tasks("a") == [] and task_config_updates(after, {}) == []


def test_session_keys() -> None:
    assert session_key_due(_snapshot(), now_ms=1000, ttl_ms=3_600_000)
    key = new_session_key(1000, os.urandom)
    assert (len(key.key), key.algorithm, key.creation_timestamp) == (32, "HmacSHA256", 1000)
    with_key = _snapshot(key)
    assert not session_key_due(with_key, now_ms=1000 + 3_599_999, ttl_ms=3_600_000)
    assert session_key_due(with_key, now_ms=1000 + 3_600_000, ttl_ms=3_600_000)
    assert len(new_session_key(0, os.urandom, "HmacSHA512", 512).key) == 64
    assert isinstance(with_key.session_key, SessionKeyRecord)
