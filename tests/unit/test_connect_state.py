"""Config-topic state (Kafka Connect's rules for staged task configs, deletions, target
states and KIP-618 fencing bookkeeping), committable source offsets, and the offsets view."""

from __future__ import annotations

from oncelog.connect.api import partition_key
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.submitted_records import SubmittedRecords
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    RestartRequestRecord,
    SessionKeyRecord,
    TargetStateRecord,
    TaskCommitRecord,
    TaskConfigRecord,
    TaskCountRecord,
    decode,
    encode,
)
from oncelog.connect.storage.config_state import (
    ConfigState,
    ConnectorChanged,
    RestartRequested,
    SessionKeyChanged,
    TargetStateChanged,
    TasksChanged,
)
from oncelog.connect.storage.offset_records import OffsetRecord
from oncelog.connect.storage.offsets import OffsetsView


def _feed(state: ConfigState, *records: object) -> list[object]:
    events: list[object] = []
    for record in records:
        # Through the wire format, as the reader will see them.
        key, value = encode(record)  # type: ignore[arg-type]
        events.extend(state.apply(state.offset, decode(key, value)))
    return events


def T(connector: str, task: int) -> ConnectorTaskId:
    return ConnectorTaskId(connector, task)


def test_task_configs_apply_on_a_complete_commit() -> None:
    state = ConfigState()
    events = _feed(
        state,
        ConnectorConfigRecord("c", {"connector.class": "X"}),
        TaskConfigRecord("c", 0, {"t": "0"}),
        TaskConfigRecord("c", 1, {"t": "1"}),
    )
    assert events == [ConnectorChanged("c")]
    snap = state.snapshot()
    assert snap.tasks("c") == [] and snap.target_state("c") is TargetState.STARTED
    assert _feed(state, TaskCommitRecord("c", 2)) == [TasksChanged("c", (T("c", 0), T("c", 1)))]
    snap = state.snapshot()
    assert snap.offset == 4
    assert snap.tasks("c") == [T("c", 0), T("c", 1)]
    assert snap.task_configs[T("c", 1)] == {"t": "1"}
    assert snap.task_config_generations == {"c": 0}
    assert snap.pending_fencing == {"c"}
    assert snap.task_counts_by_connector() == {"c": 2}
    # Reconfiguration to one task drops task 1.
    _feed(state, TaskConfigRecord("c", 0, {"t": "new"}), TaskCommitRecord("c", 1))
    snap = state.snapshot()
    assert snap.tasks("c") == [T("c", 0)] and set(snap.task_configs) == {T("c", 0)}
    assert snap.task_configs[T("c", 0)] == {"t": "new"}
    assert snap.task_config_generations == {"c": 1}
    _feed(state, TaskCountRecord("c", 1))
    assert (
        state.snapshot().pending_fencing == frozenset()
        and state.snapshot().task_count_records == {"c": 1}
    )


def test_incomplete_commit_makes_the_connector_inconsistent() -> None:
    state = ConfigState()
    _feed(
        state,
        ConnectorConfigRecord("c", {}),
        TaskConfigRecord("c", 0, {}),
        TaskCommitRecord("c", 1),
    )
    # A leader died after writing task 1 of 3 and still wrote the commit.
    events = _feed(state, TaskConfigRecord("c", 1, {"x": "1"}), TaskCommitRecord("c", 3))
    assert events == []
    snap = state.snapshot()
    assert snap.inconsistent == {"c"} and snap.tasks("c") == []
    assert snap.task_counts_by_connector() == {"c": 0}
    # The staged configs were dropped: a complete fresh set repairs the connector.
    _feed(
        state,
        *(TaskConfigRecord("c", i, {"i": str(i)}) for i in range(3)),
        TaskCommitRecord("c", 3),
    )
    snap = state.snapshot()
    assert snap.inconsistent == frozenset() and snap.tasks("c") == [T("c", 0), T("c", 1), T("c", 2)]


def test_delete_target_states_session_key_and_restarts() -> None:
    state = ConfigState()
    _feed(
        state,
        ConnectorConfigRecord("c", {}),
        TaskConfigRecord("c", 0, {}),
        TaskCommitRecord("c", 1),
    )
    assert _feed(state, TargetStateRecord("c", TargetState.STOPPED)) == [TargetStateChanged("c")]
    assert _feed(state, TargetStateRecord("c", TargetState.STOPPED)) == []  # no change
    assert state.snapshot().target_state("c") is TargetState.STOPPED
    assert _feed(state, RestartRequestRecord("c", True, True)) == []  # still catching up
    state.caught_up = True
    assert _feed(state, RestartRequestRecord("c", True, False)) == [
        RestartRequested(RestartRequestRecord("c", True, False))
    ]
    key = SessionKeyRecord(b"k" * 32, "HmacSHA256", 5)
    assert _feed(state, key) == [SessionKeyChanged()] and state.snapshot().session_key == key
    events = _feed(state, ConnectorConfigRecord("c", None), TargetStateRecord("c", None))
    assert events == [ConnectorChanged("c"), TargetStateChanged("c")]
    snap = state.snapshot()
    assert snap.connectors() == [] and snap.task_configs == {} and snap.target_state("c") is None
    assert snap.tasks("c") == []


def test_submitted_records_commit_only_acknowledged_prefixes() -> None:
    submitted = SubmittedRecords()
    a, b = {"table": "a"}, {"table": "b"}
    a1 = submitted.submit(a, {"id": 1})
    a2 = submitted.submit(a, {"id": 2})
    a3 = submitted.submit(a, {"id": 3})
    b1 = submitted.submit(b, {"id": 10})
    untracked = submitted.submit(None, None)
    submitted.ack(untracked)
    submitted.ack(a2)
    submitted.ack(b1)
    first = submitted.committable_offsets()
    assert first.offsets == {partition_key(b): {"id": 10}}
    assert (first.committable, first.uncommittable) == (1, 3)
    assert first.partitions == {partition_key(b): b}
    submitted.ack(a1)
    second = submitted.committable_offsets()
    assert second.offsets == {partition_key(a): {"id": 2}} and (
        second.committable,
        second.uncommittable,
    ) == (2, 1)
    assert submitted.pending() == 1 and submitted.unacked() == 1
    a4 = submitted.submit(a, {"id": 4})
    assert submitted.remove(a3) is False and submitted.remove(a4) is True
    submitted.ack(a3)
    assert submitted.committable_offsets().offsets == {partition_key(a): {"id": 3}}
    assert submitted.committable_offsets().is_empty() and submitted.pending() == 0


def test_offsets_view_reads_the_topic() -> None:
    view = OffsetsView()
    view.apply(OffsetRecord("src", {"filename": "/a"}, {"position": 5}))
    view.apply(OffsetRecord("src", {"filename": "/a"}, {"position": 9}))
    view.apply(OffsetRecord("src", {"filename": "/b"}, {"position": 1}))
    view.apply(OffsetRecord("other", {"filename": "/a"}, {"position": 100}))
    assert view.reader("src").offset({"filename": "/a"}) == {"position": 9}
    assert sorted(view.connector_offsets("src"), key=str) == [
        ({"filename": "/a"}, {"position": 9}),
        ({"filename": "/b"}, {"position": 1}),
    ]
    view.apply(OffsetRecord("src", {"filename": "/b"}, None))  # KIP-875 reset
    assert view.connector_offsets("src") == [({"filename": "/a"}, {"position": 9})]
    assert view.reader("other").offset({"filename": "/a"}) == {"position": 100}
    assert view.connector_offsets("nobody") == []
