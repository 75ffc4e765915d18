"""Committed offsets: OffsetCommit/TxnOffsetCommit validation, KIP-447 pending offsets,
OffsetFetch, OffsetDelete, DeleteGroups, retention, and replay of the offsets log."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog.group import (
    CommitPartition,
    DeleteGroupsReply,
    GroupConfig,
    GroupState,
    LeaveMember,
    OffsetCommitRequest,
    OffsetDeleteReply,
    OffsetDeleteRequest,
    partition_for,
)
from oncelog.group.offsets_codec import OffsetKey, OffsetsCodecError, OffsetValue, decode_record
from tests.unit.test_group_support import Harness

E = ErrorCode
S = GroupState
TP0 = ("t1", 0)
TP1 = ("t1", 1)
DAY = 86_400_000


def tombstones(h: Harness) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for _, key, value, _ in h.log:
        if value is None:
            k = decode_record(key, None)[0]
            out.append(
                (k.group_id, k.topic, str(k.partition))
                if isinstance(k, OffsetKey)
                else (k.group_id,)
            )
    return out


# -- OffsetCommit --------------------------------------------------------------------------


def test_simple_commit_creates_a_simple_group() -> None:
    h = Harness()
    assert h.commit({TP0: 10, TP1: 20}, group="s", metadata="meta") == {TP0: E.none, TP1: E.none}
    reply = h.fetch_reply(TP0, ("t1", 9), group="s")
    assert reply.error is E.none
    ((topic, parts),) = reply.topics
    assert topic == "t1"
    assert [(p.partition, p.offset, p.leader_epoch, p.metadata, p.error) for p in parts] == [
        (0, 10, 7, "meta", E.none),
        (9, -1, -1, "", E.none),
    ]
    group = h.group("s")
    assert group.state is S.EMPTY and group.protocol_type is None
    # The record went to the group's partition, keyed by (group, topic, partition).
    part, key, value, pid = h.log[0]
    assert part == partition_for("s") and pid == -1
    k, v = decode_record(key, value)
    assert k == OffsetKey("s", "t1", 0)
    assert v == OffsetValue(10, 7, "meta", h.now, None)


def test_fetch_unknown_group_and_all_offsets() -> None:
    h = Harness()
    assert h.fetch(TP0, group="nobody") == {TP0: (-1, E.none)}
    assert h.fetch_reply(group="nobody").topics == ()
    h.commit({("b", 1): 5, ("a", 0): 1, ("b", 0): 4})
    assert h.fetch() == {("a", 0): (1, E.none), ("b", 0): (4, E.none), ("b", 1): (5, E.none)}


def test_commit_validation() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", None])
    leader = ids[0]
    ok = {TP0: E.none}
    assert h.commit({TP0: 1}, generation=gen, member_id=leader, instance="i0") == ok
    assert h.commit({TP0: 1}, generation=gen - 1, member_id=leader) == {TP0: E.illegal_generation}
    assert h.commit({TP0: 1}, generation=gen, member_id="x") == {TP0: E.unknown_member_id}
    assert h.commit({TP0: 1}, generation=gen, member_id="x", instance="i0") == {
        TP0: E.fenced_instance_id
    }
    assert h.commit({TP0: 1}, generation=gen, member_id=leader, instance="i9") == {
        TP0: E.unknown_member_id
    }
    assert h.commit({TP0: 1}) == {TP0: E.unknown_member_id}  # non-empty group, no identity
    # Unknown group, but the request claims a generation.
    assert h.commit({TP0: 1}, group="gone", generation=3, member_id="m", version=8) == {
        TP0: E.illegal_generation
    }
    assert h.commit({TP0: 1}, group="gone", generation=3, member_id="m") == {
        TP0: E.group_id_not_found
    }
    assert h.coord.group("gone") is None


def test_commit_in_completing_and_preparing_rebalance() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    h.join(ids[0])  # PreparingRebalance: commits still allowed (and count as a heartbeat)
    h.advance(8_000)
    assert h.commit({TP0: 3}, generation=gen, member_id=ids[1]) == {TP0: E.none}
    h.advance(8_000)  # 16 s without a heartbeat, but the commit kept the follower alive
    assert ids[1] in h.group("g").members
    r = h.join(ids[1])
    assert h.group("g").state is S.COMPLETING_REBALANCE
    assert h.commit({TP0: 4}, generation=r.generation_id, member_id=ids[1]) == {
        TP0: E.rebalance_in_progress
    }
    assert h.commit({TP0: 4}, generation=gen, member_id=ids[1]) == {TP0: E.illegal_generation}


def test_simple_commit_to_an_empty_consumer_group() -> None:
    h = Harness()
    ids, gen = h.stable_group(1)
    h.leave(LeaveMember(ids[0]))
    assert h.group("g").state is S.EMPTY
    assert h.commit({TP0: 9}) == {TP0: E.none}  # e.g. kafka-consumer-groups --reset-offsets
    assert h.commit({TP0: 9}, generation=gen, member_id=ids[0]) == {TP0: E.unknown_member_id}


def test_metadata_too_large_rejects_only_that_partition() -> None:
    h = Harness(GroupConfig(offset_metadata_max_bytes=4))
    parts = (CommitPartition(0, 1, -1, "12345"), CommitPartition(1, 2, -1, "\U0001f600\U0001f600"))
    reply = h.run(h.coord.offset_commit(OffsetCommitRequest("g", (("t1", parts),)), h.now))
    # Java String.length(): each emoji is two UTF-16 code units.
    assert reply.topics == (("t1", ((0, E.offset_metadata_too_large), (1, E.none))),)
    assert h.fetch(TP0, TP1) == {TP0: (-1, E.none), TP1: (2, E.none)}


# -- TxnOffsetCommit (KIP-98, KIP-447) -----------------------------------------------------


def test_txn_offsets_are_pending_until_commit() -> None:
    h = Harness()
    h.commit({TP0: 5})
    assert h.txn_commit({TP0: 10, TP1: 11}, pid=42) == {TP0: E.none, TP1: E.none}
    _, _, _, pid = h.log[-1]
    assert pid == 42  # a transactional batch
    assert h.fetch(TP0, TP1) == {TP0: (5, E.none), TP1: (-1, E.none)}  # invisible
    assert h.fetch(TP0, TP1, require_stable=True) == {
        TP0: (-1, E.unstable_offset_commit),
        TP1: (-1, E.unstable_offset_commit),
    }
    assert h.fetch(("t1", 2), require_stable=True) == {("t1", 2): (-1, E.none)}
    h.complete_txn(42, commit=True)
    assert h.fetch(TP0, TP1, require_stable=True) == {TP0: (10, E.none), TP1: (11, E.none)}


def test_txn_offsets_discarded_on_abort() -> None:
    h = Harness()
    h.commit({TP0: 5})
    h.txn_commit({TP0: 10}, pid=42)
    h.complete_txn(42, commit=False)
    assert h.fetch(TP0, require_stable=True) == {TP0: (5, E.none)}
    assert not h.group("g").pending_txn_offsets


def test_later_commit_wins_over_earlier_pending_txn_offset() -> None:
    h = Harness()
    h.txn_commit({TP0: 10, TP1: 10}, pid=1)
    h.commit({TP0: 20})  # after the transactional write: it is newer
    h.complete_txn(1, commit=True)
    assert h.fetch(TP0, TP1) == {TP0: (20, E.none), TP1: (10, E.none)}
    h.txn_commit({TP0: 30}, pid=2)  # a later transactional write wins over the commit
    h.complete_txn(2, commit=True)
    assert h.fetch(TP0) == {TP0: (30, E.none)}


def test_txn_commit_fencing_kip447() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=[None, "i1"])
    ok = {TP0: E.none}
    assert h.txn_commit({TP0: 1}, pid=7, generation=gen, member_id=ids[0]) == ok
    assert h.txn_commit({TP0: 1}, pid=7, generation=gen - 1, member_id=ids[0]) == {
        TP0: E.illegal_generation
    }
    assert h.txn_commit({TP0: 1}, pid=7, generation=gen, member_id="zombie") == {
        TP0: E.unknown_member_id
    }
    assert h.txn_commit({TP0: 1}, pid=7, generation=gen, member_id="zombie", instance="i1") == {
        TP0: E.fenced_instance_id
    }
    # v0-v2 requests carry no group metadata and are not fenced by the group.
    assert h.txn_commit({TP0: 2}, pid=8) == ok
    assert h.txn_commit({TP0: 1}, pid=9, group="nope", generation=1, member_id="m") == {
        TP0: E.illegal_generation
    }
    # A generation bump fences the previous one, even for the same member.
    h.join(ids[0])
    h.join(ids[1], instance="i1")
    assert h.txn_commit({TP0: 3}, pid=7, generation=gen, member_id=ids[0]) == {
        TP0: E.illegal_generation
    }


def test_complete_txn_is_scoped_to_a_partition() -> None:
    h = Harness(GroupConfig(offsets_topic_num_partitions=50))
    a, b = "group-a", "group-b"
    assert partition_for(a) != partition_for(b)
    h.txn_commit({TP0: 1}, pid=5, group=a)
    h.txn_commit({TP0: 2}, pid=5, group=b)
    h.coord.complete_txn(5, True, partition_for(a))
    assert h.fetch(TP0, group=a, require_stable=True) == {TP0: (1, E.none)}
    assert h.fetch(TP0, group=b, require_stable=True) == {TP0: (-1, E.unstable_offset_commit)}
    h.coord.complete_txn(5, False, partition_for(b))
    assert h.fetch(TP0, group=b, require_stable=True) == {TP0: (-1, E.none)}


# -- OffsetDelete / DeleteGroups -----------------------------------------------------------


def offset_delete(h: Harness, group: str, topics: dict[str, tuple[int, ...]]) -> OffsetDeleteReply:
    reply = h.run(h.coord.offset_delete(OffsetDeleteRequest(group, tuple(topics.items())), h.now))
    assert isinstance(reply, OffsetDeleteReply)
    return reply


def test_offset_delete() -> None:
    h = Harness()
    assert offset_delete(h, "nobody", {"t1": (0,)}).error is E.group_id_not_found
    ids, gen = h.stable_group(1)  # subscribed to t1
    h.commit({TP0: 1, ("t2", 0): 2}, generation=gen, member_id=ids[0])
    reply = offset_delete(h, "g", {"t1": (0,), "t2": (0, 5)})
    assert reply.error is E.none
    assert reply.topics == (
        ("t1", ((0, E.group_subscribed_to_topic),)),
        ("t2", ((0, E.none), (5, E.none))),
    )
    assert h.fetch(TP0, ("t2", 0)) == {TP0: (1, E.none), ("t2", 0): (-1, E.none)}
    assert tombstones(h) == [("g", "t2", "0")]  # nothing to delete for t2-5
    h.leave(LeaveMember(ids[0]))
    assert offset_delete(h, "g", {"t1": (0,)}).topics == (("t1", ((0, E.none),)),)
    assert h.fetch(TP0) == {TP0: (-1, E.none)}


def test_offset_delete_non_consumer_group_must_be_empty() -> None:
    h = Harness()
    h.join(ptype="connect", protocols=(("v1", b""),), version=3)
    assert offset_delete(h, "g", {"t1": (0,)}).error is E.non_empty_group


def test_delete_groups() -> None:
    h = Harness()
    ids, gen = h.stable_group(1, group="busy")
    h.commit({TP0: 1, TP1: 2}, group="idle")
    h.txn_commit({("t2", 0): 3}, pid=3, group="idle")
    step = h.coord.delete_groups(["busy", "idle", "nobody", "idle"], h.now)
    assert isinstance(step.reply, DeleteGroupsReply)
    assert step.reply.results == (
        ("busy", E.non_empty_group),
        ("idle", E.none),
        ("nobody", E.group_id_not_found),
    )
    h.run(step)
    assert h.coord.group("idle") is None
    assert sorted(tombstones(h)) == [("idle", "t1", "0"), ("idle", "t1", "1"), ("idle", "t2", "0")]
    assert h.fetch(TP0, group="idle") == {TP0: (-1, E.none)}
    h.complete_txn(3, commit=True)  # the marker comes later: nothing to resurrect
    assert h.fetch(("t2", 0), group="idle") == {("t2", 0): (-1, E.none)}
    h.leave(LeaveMember(ids[0]), group="busy")
    step = h.coord.delete_groups(["busy"], h.now)
    assert step.reply == DeleteGroupsReply((("busy", E.none),))
    h.run(step)
    assert tombstones(h)[-1] == ("busy",)  # the group metadata record


# -- retention -----------------------------------------------------------------------------


RETENTION = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60_000)
LONG_SESSION = 1_800_000


def test_retention_clock_starts_when_group_empties() -> None:
    h = Harness(RETENTION)
    ids, gen = h.stable_group(1, session=LONG_SESSION)
    h.commit({TP0: 1}, generation=gen, member_id=ids[0])
    for _ in range(2 * DAY // 1_500_000 + 1):  # consuming for two days after the commit
        h.advance(1_500_000)
        assert h.heartbeat(ids[0], gen) is E.none
    assert h.fetch(TP0) == {TP0: (1, E.none)}
    h.leave(LeaveMember(ids[0]))
    h.advance(DAY - 120_000)
    assert h.fetch(TP0) == {TP0: (1, E.none)}  # the commit is old, but the group just emptied
    h.advance(120_000)
    assert h.fetch(TP0) == {TP0: (-1, E.none)}
    # The same check removes the empty group, now without offsets.
    assert tombstones(h)[-2:] == [("g", "t1", "0"), ("g",)]
    assert h.coord.group("g") is None


def test_retention_of_simple_and_stable_groups() -> None:
    h = Harness(RETENTION)
    h.commit({TP0: 1}, group="simple")
    h.commit({TP1: 1}, group="simple", retention=120_000)  # v2-v4 explicit retention
    ids, gen = h.stable_group(1, group="live", session=LONG_SESSION)  # subscribed to t1 only
    h.commit({TP0: 1, ("t2", 0): 1, ("t3", 0): 4}, group="live", generation=gen, member_id=ids[0])
    h.txn_commit({("t3", 0): 5}, pid=9, group="live", generation=gen, member_id=ids[0])
    h.advance(180_000)
    assert h.fetch(TP0, TP1, group="simple") == {TP0: (1, E.none), TP1: (-1, E.none)}
    for _ in range(DAY // 1_500_000 + 1):
        h.advance(1_500_000)
        assert h.heartbeat(ids[0], gen, group="live") is E.none
    assert h.fetch(TP0, group="simple") == {TP0: (-1, E.none)}
    # Subscribed t1 stays; unsubscribed t2 expires; t3 stays while a transaction is open on it.
    assert h.fetch(TP0, ("t2", 0), ("t3", 0), group="live") == {
        TP0: (1, E.none),
        ("t2", 0): (-1, E.none),
        ("t3", 0): (4, E.none),
    }
    h.complete_txn(9, commit=False)
    h.advance(60_000)
    assert h.fetch(("t3", 0), group="live") == {("t3", 0): (-1, E.none)}


def test_pending_members_keep_an_empty_group() -> None:
    h = Harness(RETENTION)
    pending = h.join(session=90_000)
    h.advance(60_000)  # a retention check: the group only has a pending member, it stays
    assert h.group("g").pending_members
    h.advance(30_000)
    assert not h.group("g").pending_members
    h.advance(30_000)
    assert h.coord.group("g") is None
    assert pending.error is E.member_id_required


# -- load / replay -------------------------------------------------------------------------


def test_replay_restores_offsets_and_groups() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", None])
    h.commit({TP0: 1}, generation=gen, member_id=ids[0])
    h.commit({TP1: 2}, group="simple")
    h.txn_commit({TP0: 10}, pid=1)  # committed
    h.complete_txn(1, commit=True)
    h.txn_commit({TP1: 11}, pid=2)  # aborted
    h.complete_txn(2, commit=False)
    h.txn_commit({("t2", 0): 12}, pid=3)  # still open at the crash
    coord = h.reload()
    assert h.fetch(TP0, TP1) == {TP0: (10, E.none), TP1: (-1, E.none)}
    assert h.fetch(TP1, group="simple") == {TP1: (2, E.none)}
    assert h.fetch(("t2", 0), require_stable=True) == {("t2", 0): (-1, E.unstable_offset_commit)}
    coord.complete_txn(3, True)
    assert h.fetch(("t2", 0), require_stable=True) == {("t2", 0): (12, E.none)}
    # The group is back Stable with its generation, members and assignments.
    group = h.group("g")
    assert group.state is S.STABLE and group.generation_id == gen
    assert list(group.members) == ids and group.leader_id == ids[0]
    assert group.static_members == {"i0": ids[0]}
    assert group.subscribed_topics == frozenset({"t1"})
    assert h.sync(ids[1], gen).assignment == f"assign-{ids[1]}".encode()
    # Members that keep heartbeating carry on; a silent one expires and forces a rebalance.
    h.advance(9_000)
    assert h.heartbeat(ids[0], gen, instance="i0") is E.none
    h.advance(1_000)
    assert list(group.members) == [ids[0]] and group.state is S.PREPARING_REBALANCE
    r = h.join(ids[0], instance="i0")
    assert r.generation_id == gen + 1


def test_replay_empty_group_keeps_generation_and_tombstones() -> None:
    h = Harness()
    ids, gen = h.stable_group(1)
    h.commit({TP0: 1}, group="doomed")
    h.run(h.coord.delete_groups(["doomed"], h.now))
    h.leave(LeaveMember(ids[0]))
    coord = h.reload()
    assert coord.group("doomed") is None
    group = h.group("g")
    assert group.state is S.EMPTY and group.generation_id == gen + 1
    assert group.protocol_type == "consumer" and not group.members
    r = h.join(h.join().member_id)
    h.advance(3_000)
    assert h.answer(r).generation_id == gen + 2


def test_replay_rejects_corrupt_records() -> None:
    h = Harness()
    coord = h.new_coordinator()
    try:
        coord.load([(b"\x00\x09junk", b"")])
    except OffsetsCodecError:
        pass
    else:
        raise AssertionError("corrupt key accepted")


def test_load_marker_only_settles_groups_of_that_partition() -> None:
    h = Harness()
    h.txn_commit({TP0: 1}, pid=5, group="group-a")
    h.txn_commit({TP0: 2}, pid=5, group="group-b")
    coord = h.new_coordinator()
    for _, key, value, pid in h.log:
        coord.load([(key, value)], producer_id=pid)
    coord.load_marker(5, True, partition_for("group-a"))
    coord.finish_load(h.now)
    h.coord = coord
    assert h.fetch(TP0, group="group-a", require_stable=True) == {TP0: (1, E.none)}
    assert h.fetch(TP0, group="group-b", require_stable=True) == {
        TP0: (-1, E.unstable_offset_commit)
    }


def test_static_member_kept_at_an_old_generation_cannot_commit() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", "i1"])
    h.join(ids[0], instance="i0", session=60_000)  # the leader forces a rebalance
    for _ in range(4):  # i1 heartbeats but never rejoins: kept, one generation behind
        h.advance(8_000)
        h.heartbeat(ids[1], gen, instance="i1")
    assert h.group().generation_id == gen + 1 and ids[1] in h.group().members
    assert h.commit({TP0: 1}, generation=gen, member_id=ids[1], instance="i1") == {
        TP0: E.illegal_generation
    }
    assert h.txn_commit({TP0: 1}, pid=1, generation=gen, member_id=ids[1], instance="i1") == {
        TP0: E.illegal_generation
    }


def test_config_from_broker_properties() -> None:
    cfg = GroupConfig.from_properties(
        {
            "group.initial.rebalance.delay.ms": 0,
            "offsets.retention.minutes": 60,
            "offsets.topic.num.partitions": "3",
            "unrelated": "x",
        }
    )
    assert cfg.initial_rebalance_delay_ms == 0
    assert cfg.offsets_retention_ms == 3_600_000
    assert cfg.offsets_topic_num_partitions == 3
    assert cfg.min_session_timeout_ms == GroupConfig().min_session_timeout_ms
