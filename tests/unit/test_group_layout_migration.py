"""Start-up migration of legacy-layout ``__consumer_offsets`` records: the rewrite replays to
the same state, leaves pending transactional offsets alone, is not repeated, and a compacted
mixed log (tombstones gone too) still loads to the same state: nothing legacy comes back."""

from __future__ import annotations

from typing import Any

from oncelog.group import partition_for
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.offsets_codec import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_record,
)
from oncelog.group.state import CommittedOffset

from ..legacy_layouts import (
    legacy_group_key,
    legacy_group_value,
    legacy_offset_key,
    legacy_offset_value,
)
from .test_group_support import T0, Harness

PID = 77


def _offset(o: CommittedOffset) -> tuple[Any, ...]:
    return (o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms, o.expire_timestamp_ms)


def snapshot(coord: GroupCoordinator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in coord.groups():
        members = [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.protocols,
                m.assignment,
            )
            for m in g.members.values()
        ]
        out[g.group_id] = (
            g.state,
            g.generation_id,
            g.protocol_type,
            g.protocol_name,
            g.leader_id,
            g.persisted,
            members,
            {tp: _offset(o) for tp, o in sorted(g.offsets.items())},
            {
                pid: {tp: _offset(o) for tp, o in p.items()}
                for pid, p in g.pending_txn_offsets.items()
            },
        )
    return out


def legacy_log() -> list[tuple[int, bytes, bytes | None, int]]:
    def offset(group: str, partition: int, value: int) -> tuple[bytes, bytes]:
        v = OffsetValue(value, 3, f"m{value}", T0 - 10, None)
        return legacy_offset_key(group, "t", partition), legacy_offset_value(v)

    stable = GroupValue(
        "consumer",
        4,
        "range",
        "a-1",
        T0 - 5,
        (
            MemberValue("a-1", "inst-1", "c", "/h", 60_000, 45_000, b"sub-1", b"asg-1"),
            MemberValue("a-2", None, "c", "/h", 60_000, 45_000, b"sub-2", b"asg-2"),
        ),
    )
    pa, pb = partition_for("A"), partition_for("B")
    return [
        (pa, *offset("A", 0, 5), -1),
        (pa, *offset("A", 1, 6), -1),
        (pa, *offset("A", 1, 7), -1),
        (pa, legacy_group_key("A"), legacy_group_value(stable), -1),
        (pb, *offset("B", 0, 3), -1),
        (pb, *offset("B", 1, 8), PID),  # a TxnOffsetCommit whose transaction is still open
        (pb, *offset("B", 2, 9), -1),
        (pb, legacy_offset_key("B", "t", 2), None, -1),  # deleted already
    ]


def live_legacy(log: list[tuple[int, bytes, bytes | None, int]]) -> dict[bytes, bool]:
    live: dict[bytes, bool] = {}
    for _, key, value, _ in log:
        if decode_key(key).legacy:
            live[key] = value is not None
    return live


def test_migration_rewrites_legacy_keys_and_replays_to_the_same_state() -> None:
    h = Harness()
    h.log = legacy_log()
    before = snapshot(h.reload())
    assert set(before) == {"A", "B"}
    assert before["B"][8] == {PID: {("t", 1): (8, 3, "m8", T0 - 10, None)}}
    step, count = h.coord.migrate_legacy(live_legacy(h.log))
    assert count == 4  # A's two offsets and metadata, B's committed offset
    start = len(h.log)
    h.run(step)
    written = [(p, decode_record(k, v), decode_key(k).legacy) for p, k, v, _ in h.log[start:]]
    pa, pb = partition_for("A"), partition_for("B")
    legacy_tombstones = [(p, r[0]) for p, r, legacy in written if legacy]
    assert all(r[1] is None for _, r, legacy in written if legacy)
    assert len(legacy_tombstones) == 4
    assert set(legacy_tombstones) == {
        (pa, OffsetKey("A", "t", 0)),
        (pa, OffsetKey("A", "t", 1)),
        (pa, GroupKey("A")),
        (pb, OffsetKey("B", "t", 0)),
    }
    kafka = {r[0]: r[1] for _, r, legacy in written if not legacy}
    assert kafka[OffsetKey("A", "t", 1)] == OffsetValue(7, 3, "m7", T0 - 10, None)
    assert kafka[OffsetKey("B", "t", 0)] == OffsetValue(3, 3, "m3", T0 - 10, None)
    assert len(kafka) == 4
    assert snapshot(h.coord) == before
    # The mixed log replays to the same state, and there is nothing left to migrate.
    assert snapshot(h.reload()) == before
    assert h.coord.migrate_legacy(live_legacy(h.log))[1] == 0
    # Compaction: the latest record per key only, tombstones dropped too (after
    # delete.retention.ms). No legacy value survives to come back, except B's pending one.
    latest: dict[bytes, int] = {k: i for i, (_, k, _, _) in enumerate(h.log)}
    h.log = [e for i, e in enumerate(h.log) if latest[e[1]] == i and e[2] is not None]
    assert [decode_record(k, v)[0] for _, k, v, _ in h.log if decode_key(k).legacy] == [
        OffsetKey("B", "t", 1)
    ]
    assert snapshot(h.reload()) == before
    # The transaction commits: B's pending offset becomes committed, in either log.
    h.complete_txn(PID, True)
    assert snapshot(h.coord)["B"][7][("t", 1)] == (8, 3, "m8", T0 - 10, None)
