"""PartitionedGroups: one group coordinator per ``__consumer_offsets`` partition, each
loading, loaded or failed on its own (Kafka's coordinator shards): a request gets the
state of its group's partition, calls over many groups are split and merged."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog.group.config import GroupConfig
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.messages import (
    CommitPartition,
    DeleteGroupsReply,
    HeartbeatRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.partitioned import PartitionedGroups
from oncelog.group.state import GroupState

E = ErrorCode
CONFIG = GroupConfig(offsets_topic_num_partitions=3)


def groups_on(partition: int, n: int = 1) -> list[str]:
    ids = (f"g{i}" for i in range(10_000))
    return [g for g in ids if PartitionedGroups(CONFIG).partition_for(g) == partition][:n]


def loaded_core() -> GroupCoordinator:
    core = GroupCoordinator(CONFIG)
    core.finish_load(0)
    return core


def commit(group: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, (("t", (CommitPartition(0, offset),)),))


def test_each_partition_answers_by_its_own_state() -> None:
    groups = PartitionedGroups(CONFIG)
    assert groups.loading() == [0, 1, 2] and not groups.loaded
    groups.install(0, loaded_core())
    groups.mark_failed(1)
    (g0,), (g1,), (g2,) = groups_on(0), groups_on(1), groups_on(2)
    assert (groups.loading(), groups.failed()) == ([2], [1])
    assert [groups.unavailable(g) for g in (g0, g1, g2)] == [
        None,
        E.not_coordinator,
        E.coordinator_load_in_progress,
    ]
    committed = [groups.offset_commit(commit(g, 5), 0) for g in (g0, g1, g2)]
    assert [c.reply.topics for c in committed] == [  # type: ignore[union-attr]
        (("t", ((0, E.none),)),),
        (("t", ((0, E.not_coordinator),)),),
        (("t", ((0, E.coordinator_load_in_progress),)),),
    ]
    assert [[a.partition for a in c.appends] for c in committed] == [[0], [], []]
    fetched = [groups.offset_fetch(OffsetFetchRequest(g, None)).error for g in (g0, g1, g2)]
    assert fetched == [E.none, E.not_coordinator, E.coordinator_load_in_progress]
    beats = [groups.heartbeat(HeartbeatRequest(g, 1, "m"), 0).reply for g in (g0, g1, g2)]
    errors = [b.error for b in beats]  # type: ignore[union-attr]
    assert errors == [E.unknown_member_id, E.not_coordinator, E.none]
    described = groups.describe_groups([g2, g1, g0], 5)
    assert [d.error for d in described] == [
        E.coordinator_load_in_progress,
        E.not_coordinator,
        E.none,
    ]
    assert described[2].state == GroupState.EMPTY.value
    # ListGroups: COORDINATOR_LOAD_IN_PROGRESS while any partition loads (Kafka fails the
    # whole answer); then a failed partition lists nothing.
    assert groups.list_groups().error is E.coordinator_load_in_progress
    groups.install(2, loaded_core())
    listed = groups.list_groups()
    assert (listed.error, [g.group_id for g in listed.groups]) == (E.none, [g0])
    assert groups.loading() == [] and not groups.loaded
    groups.mark_loading(1)  # a retry
    assert groups.unavailable(g1) is E.coordinator_load_in_progress
    groups.install(1, loaded_core())
    assert groups.loaded


def test_delete_groups_is_split_by_partition_and_answered_in_order() -> None:
    groups = PartitionedGroups(CONFIG)
    groups.install(0, loaded_core())
    groups.install(2, loaded_core())
    groups.mark_failed(1)
    a, b = groups_on(0, 2)
    (c,), (d,) = groups_on(1), groups_on(2)
    groups.offset_commit(commit(a, 1), 0)
    groups.offset_commit(commit(d, 1), 0)
    step = groups.delete_groups([d, c, b, a, d], 0)
    assert step.reply == DeleteGroupsReply(
        ((d, E.none), (c, E.not_coordinator), (b, E.group_id_not_found), (a, E.none))
    )
    assert sorted(append.partition for append in step.appends) == [0, 2]
    assert groups.group(a) is None and groups.group(d) is None


def test_a_marker_reaches_only_loaded_partitions() -> None:
    """A partition still loading reads the marker from its log; a loaded one applies it."""
    groups = PartitionedGroups(CONFIG)
    groups.install(0, loaded_core())
    (g0,) = groups_on(0)
    core = groups.cores[0]
    req = TxnOffsetCommitRequest("tx", g0, 7, 0, (("t", (CommitPartition(0, 42),)),))
    groups.txn_offset_commit(req, 0)
    groups.complete_txn(7, True, 1)  # another partition's marker: not this group's
    assert core.offset_fetch(OffsetFetchRequest(g0, None)).topics == ()
    groups.complete_txn(7, True, 2)  # partition 2 is loading: ignored, no error
    groups.complete_txn(7, True, 0)
    [(_, [fetched])] = core.offset_fetch(OffsetFetchRequest(g0, None)).topics
    assert fetched.offset == 42
