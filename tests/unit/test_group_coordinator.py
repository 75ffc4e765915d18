"""Group membership with an injected clock: join/sync/heartbeat/leave, timers, static members."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from oncelog.group import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    HeartbeatReply,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveMember,
    ListGroupsReply,
    OffsetFetchRequest,
    Pending,
    SyncGroupReply,
    SyncGroupRequest,
    failed_replies,
    partition_for,
)
from oncelog.group.offsets_codec import GroupKey, GroupValue, decode_record
from tests.unit.test_group_support import Harness, subscription

E = ErrorCode
S = GroupState


def group_records(h: Harness, group: str = "g") -> list[GroupValue | None]:
    out = []
    for _, key, value, _ in h.log:
        k, v = decode_record(key, value)
        if isinstance(k, GroupKey) and k.group_id == group:
            assert v is None or isinstance(v, GroupValue)
            out.append(v)
    return out


# -- partition_for -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "n", "expected"),
    [
        ("", 50, 0),
        ("a", 50, 97 % 50),
        ("hello", 50, 99162322 % 50),  # "hello".hashCode() == 99162322
        ("Aa", 50, 2112 % 50),  # a classic collision: "Aa" and "BB"
        ("BB", 50, 2112 % 50),
        ("polygenelubricants", 50, 0),  # hashCode() == Integer.MIN_VALUE; Utils.abs maps it to 0
        ("\U0001f600", 50, (0xD83D * 31 + 0xDE00) % 50),  # two UTF-16 code units
        ("hello", 7, 99162322 % 7),
    ],
)
def test_partition_for_matches_java(group: str, n: int, expected: int) -> None:
    assert partition_for(group, n) == expected


def test_partition_for_negative_hash_uses_abs() -> None:
    # "Hello World".hashCode() == -862545276 in Java
    assert partition_for("Hello World", 50) == 862545276 % 50
    assert GroupCoordinator().partition_for("Hello World") == 862545276 % 50


# -- JoinGroup validation ------------------------------------------------------------------


def test_join_rejects_invalid_requests() -> None:
    h = Harness()
    assert h.join(group="").error is E.invalid_group_id
    assert h.join(session=5_999).error is E.invalid_session_timeout
    assert h.join(session=1_800_001).error is E.invalid_session_timeout
    assert h.join(ptype="").error is E.inconsistent_group_protocol
    assert h.join(protocols=()).error is E.inconsistent_group_protocol
    assert h.join("someone").error is E.unknown_member_id  # unknown group, known-looking id


def test_join_protocol_type_and_protocol_must_match_the_group() -> None:
    h = Harness()
    ids, _ = h.stable_group(1)
    assert h.join(ptype="connect").error is E.inconsistent_group_protocol
    assert h.join(protocols=(("roundrobin", b""),)).error is E.inconsistent_group_protocol
    # A common protocol is enough, wherever it is in the preference list.
    r = h.join(protocols=(("roundrobin", b""), ("range", subscription("t1"))))
    assert r.error is E.member_id_required


def test_requests_before_load_get_load_in_progress() -> None:
    coord = GroupCoordinator()
    req = JoinGroupRequest("g", "", "consumer", (("range", b""),), 10_000)
    assert coord.join_group(req, 0).reply == JoinGroupReply(E.coordinator_load_in_progress)
    # Heartbeat: NONE, as Kafka's GroupCoordinatorService ("the group is still loading,
    # so blindly respond").
    assert coord.heartbeat(HeartbeatRequest("g", 1, "m"), 0).reply == HeartbeatReply(E.none)
    assert coord.offset_fetch(OffsetFetchRequest("g", None)).error is E.coordinator_load_in_progress
    assert coord.list_groups() == ListGroupsReply(E.coordinator_load_in_progress, ())
    assert coord.unavailable is E.coordinator_load_in_progress
    coord.finish_load(0)
    assert coord.loaded
    assert coord.unavailable is None


def test_a_failed_load_answers_not_coordinator() -> None:
    """Kafka's FAILED coordinator state: every request, Heartbeat included, gets
    NOT_COORDINATOR (the client looks for its coordinator again)."""
    coord = GroupCoordinator()
    coord.mark_failed()
    assert coord.failed and not coord.loaded
    req = JoinGroupRequest("g", "", "consumer", (("range", b""),), 10_000)
    assert coord.join_group(req, 0).reply == JoinGroupReply(E.not_coordinator)
    assert coord.heartbeat(HeartbeatRequest("g", 1, "m"), 0).reply == HeartbeatReply(
        E.not_coordinator
    )
    assert coord.offset_fetch(OffsetFetchRequest("g", None)).error is E.not_coordinator
    assert coord.list_groups() == ListGroupsReply(E.not_coordinator, ())
    assert coord.unavailable is E.not_coordinator


# -- MEMBER_ID_REQUIRED and the initial delay ----------------------------------------------


def test_member_id_required_flow() -> None:
    h = Harness()
    r = h.join(client="consumer-1")
    assert r == JoinGroupReply(E.member_id_required, member_id="consumer-1-m1")
    assert h.group("g").pending_members  # not a member yet: no rebalance
    assert h.group("g").state is S.EMPTY
    parked = h.join("consumer-1-m1", client="consumer-1")
    assert isinstance(parked, Pending)
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.advance(2_999)
    assert h.answer(parked) is None
    h.advance(1)
    r = h.answer(parked)
    assert r.error is E.none and r.generation_id == 1 and r.leader == "consumer-1-m1"
    assert r.protocol_type == "consumer" and r.protocol_name == "range"
    assert [m.member_id for m in r.members] == ["consumer-1-m1"]
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_old_join_version_needs_no_member_id_round_trip() -> None:
    h = Harness()
    parked = h.join(version=3)
    assert isinstance(parked, Pending)
    h.advance(3_000)
    assert h.answer(parked).member_id == "c-m1"


def test_three_members_join_with_initial_delay_extension() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(3)]
    a = h.join(ids[0], client="c0")  # t=0: delay ends at 3000
    h.advance(1_000)
    b = h.join(ids[1], client="c1")
    h.advance(1_000)
    c = h.join(ids[2], client="c2")
    h.advance(1_000)  # t=3000: members were added, so the delay is extended by 3000
    assert h.answer(a) is None
    h.advance(2_999)
    assert h.answer(a) is None
    h.advance(1)  # t=6000
    replies = [h.answer(x) for x in (a, b, c)]
    assert {r.generation_id for r in replies} == {1}
    assert {r.leader for r in replies} == {ids[0]}
    assert [m.member_id for m in replies[0].members] == ids  # the leader gets everyone
    assert replies[1].members == () and replies[2].members == ()
    assert [m.metadata for m in replies[0].members] == [subscription("t1")] * 3


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness()
    a_id = h.join(client="a").member_id
    b_id = h.join(client="b").member_id
    a = h.join(a_id, rebalance=5_000)
    h.advance(1_000)
    b = h.join(b_id, rebalance=5_000)  # extends once: remaining is 5000 - 3000
    h.advance(2_000)
    assert h.answer(a) is None
    h.advance(2_000)  # t=5000
    assert h.answer(a).error is E.none and h.answer(b).error is E.none


def test_zero_initial_delay_completes_in_the_same_step() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    r = h.join(version=3)
    assert isinstance(r, JoinGroupReply) and r.error is E.none and r.generation_id == 1


def test_protocol_selected_by_vote() -> None:
    h = Harness()
    prefs = [
        (("rr", b"x"), ("range", b"y")),
        (("range", b"y"), ("rr", b"x")),
        (("rr", b"x"), ("range", b"y"), ("sticky", b"z")),
    ]
    parked = [h.join(version=3, client=f"c{i}", protocols=p) for i, p in enumerate(prefs)]
    h.advance(6_000)
    assert {h.answer(p).protocol_name for p in parked} == {"rr"}


# -- SyncGroup -----------------------------------------------------------------------------


def test_leader_sync_completes_followers_and_stores_group_first() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    gen = h.answer(parked[0]).generation_id
    follower = h.sync(ids[1], gen)
    assert isinstance(follower, Pending)  # waits for the leader
    req = SyncGroupRequest(
        "g", gen, ids[0], assignments=((ids[0], b"A"), (ids[1], b"B"), ("stranger", b"?"))
    )
    step = h.coord.sync_group(req, h.now)
    # The group record (with the assignment) is appended before anyone is answered.
    assert len(step.appends) == 1 and step.appends[0].partition == partition_for("g")
    value = decode_record(*step.appends[0].records[0])[1]
    assert isinstance(value, GroupValue) and value.generation_id == gen
    assert [(m.member_id, m.assignment) for m in value.members] == [(ids[0], b"A"), (ids[1], b"B")]
    assert step.reply == SyncGroupReply(E.none, "consumer", "range", b"A")
    assert step.resolved == [(follower.token, SyncGroupReply(E.none, "consumer", "range", b"B"))]
    h.run(step)
    assert h.group("g").state is S.STABLE
    # A late sync in Stable is answered from the stored assignment.
    assert h.sync(ids[1], gen) == SyncGroupReply(E.none, "consumer", "range", b"B")


def test_sync_errors() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    assert h.sync(ids[0], gen, group="nope").error is E.unknown_member_id
    assert h.sync("stranger", gen).error is E.unknown_member_id
    assert h.sync(ids[0], gen + 1).error is E.illegal_generation
    assert h.sync(ids[0], gen, ptype="connect").error is E.inconsistent_group_protocol
    assert h.sync(ids[0], gen, pname="roundrobin").error is E.inconsistent_group_protocol
    assert h.sync(ids[0], gen, ptype="consumer", pname="range").error is E.none
    assert h.sync(ids[0], gen, group="").error is E.invalid_group_id
    h.join(ids[0])  # the leader rejoins: PreparingRebalance
    assert h.sync(ids[1], gen).error is E.rebalance_in_progress


def test_missing_assignments_are_empty() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    gen = h.answer(parked[0]).generation_id
    assert h.sync(ids[0], gen, {ids[0]: b"A"}).assignment == b"A"
    assert h.sync(ids[1], gen).assignment == b""


def test_member_that_never_syncs_is_removed() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    gen = h.answer(parked[0]).generation_id
    h.sync(ids[0], gen, {ids[0]: b"A", ids[1]: b"B"})
    for _ in range(3):  # both heartbeat, only the leader synced
        h.advance(9_000)
        assert h.heartbeat(ids[0], gen) is E.none
        assert h.heartbeat(ids[1], gen) is E.none
    h.advance(3_000)  # 30 s (the rebalance timeout) after the join completed
    group = h.group("g")
    assert list(group.members) == [ids[0]] and group.state is S.PREPARING_REBALANCE
    assert h.heartbeat(ids[1], gen) is E.unknown_member_id


# -- Heartbeat and session expiry ----------------------------------------------------------


def test_heartbeat_errors() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", None])
    assert h.heartbeat(ids[0], gen) is E.none
    assert h.heartbeat(ids[0], gen, group="") is E.invalid_group_id
    assert h.heartbeat(ids[0], gen, group="other") is E.unknown_member_id
    assert h.heartbeat("stranger", gen) is E.unknown_member_id
    assert h.heartbeat(ids[0], gen - 1) is E.illegal_generation
    assert h.heartbeat("zombie", gen, instance="i0") is E.fenced_instance_id
    h.join(ids[0], instance="i0")  # the leader rejoins
    assert h.heartbeat(ids[1], gen) is E.rebalance_in_progress


def test_heartbeat_expiry_triggers_rebalance() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    h.advance(5_000)
    assert h.heartbeat(ids[0], gen) is E.none
    h.advance(5_000)
    group = h.group("g")
    assert list(group.members) == [ids[0]]  # the silent follower expired after 10 s
    assert group.state is S.PREPARING_REBALANCE
    assert h.heartbeat(ids[0], gen) is E.rebalance_in_progress
    r = h.join(ids[0])  # the only member rejoined: the rebalance completes at once
    assert r.error is E.none and r.generation_id == gen + 1 and r.leader == ids[0]
    assert [m.member_id for m in r.members] == [ids[0]]


def test_last_member_expiring_leaves_an_empty_group() -> None:
    h = Harness()
    ids, gen = h.stable_group(1)
    h.advance(10_000)
    group = h.group("g")
    assert group.state is S.EMPTY and group.generation_id == gen + 1 and not group.members
    assert group_records(h)[-1] == GroupValue("consumer", gen + 1, None, None, h.now, ())


def test_rebalance_timeout_removes_members_who_did_not_rejoin() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    leader_join = h.join(ids[0])  # forces a rebalance
    assert isinstance(leader_join, Pending)
    for _ in range(7):  # the follower keeps heartbeating but never rejoins
        h.advance(4_000)
        assert h.heartbeat(ids[1], gen) is E.rebalance_in_progress
        assert h.answer(leader_join) is None
    h.advance(2_000)  # 30 s
    r = h.answer(leader_join)
    assert r.error is E.none and r.generation_id == gen + 1
    assert [m.member_id for m in r.members] == [ids[0]]
    assert h.heartbeat(ids[1], gen) is E.unknown_member_id


def test_pending_member_blocks_then_expires() -> None:
    h = Harness()
    ids, gen = h.stable_group(1)
    newcomer = h.join(client="late")  # MEMBER_ID_REQUIRED: pending, no rebalance yet
    assert newcomer.error is E.member_id_required
    parked = h.join(ids[0])  # the leader rejoins; the pending member is awaited
    assert h.answer(parked) is None
    h.advance(10_000)  # the pending member's session timeout
    assert h.answer(parked).generation_id == gen + 1


def test_parked_members_are_not_expired_by_session_timeout() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    a = h.join(ids[0])
    h.advance(9_000)
    h.heartbeat(ids[1], gen)
    h.advance(9_000)  # the leader's session passed while its join was parked
    b = h.join(ids[1])
    assert h.answer(a).error is E.none and h.answer(b).error is E.none
    assert set(h.group("g").members) == set(ids)


def test_new_member_join_is_dropped_after_five_minutes() -> None:
    h = Harness()
    ids, gen = h.stable_group(1)
    late = h.join(h.join(client="late").member_id, client="late", rebalance=600_000)
    for _ in range(33):  # the old member stays alive but never rejoins
        h.advance(9_000)
        h.heartbeat(ids[0], gen)
    h.advance(3_000)  # 300 s after the new member joined
    assert h.answer(late) == JoinGroupReply(E.unknown_member_id)
    assert list(h.group("g").members) == [ids[0]]


# -- rejoin semantics ----------------------------------------------------------------------


def test_follower_rejoin_without_changes_gets_current_generation() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    r = h.join(ids[1])
    assert r.error is E.none and r.generation_id == gen and r.leader == ids[0] and r.members == ()
    assert h.group("g").state is S.STABLE
    changed = h.join(ids[1], protocols=(("range", subscription("t1", "t2")),))
    assert isinstance(changed, Pending)
    assert h.group("g").state is S.PREPARING_REBALANCE


def test_duplicate_join_in_completing_rebalance_repeats_the_response() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    first = h.answer(parked[0])
    again = h.join(ids[0])
    assert again == first  # the leader gets the member list again
    assert h.join(ids[1]) == h.answer(parked[1])


def test_superseded_join_gets_rebalance_in_progress() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    first = h.join(ids[0])
    second = h.join(ids[0])
    assert h.answer(first) == JoinGroupReply(E.rebalance_in_progress, member_id=ids[0])
    h.join(ids[1])
    assert h.answer(second).error is E.none


def test_sync_cancelled_by_rebalance() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    gen = h.answer(parked[0]).generation_id
    follower_sync = h.sync(ids[1], gen)
    h.join(client="newcomer", version=3)  # a new member: rebalance before the leader syncs
    assert h.answer(follower_sync) == SyncGroupReply(E.rebalance_in_progress)


# -- static membership ---------------------------------------------------------------------


def test_static_member_replacement_fences_the_old_id() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", "i1"])
    records_before = len(group_records(h))
    r = h.join(instance="i1", client="restarted")  # no MEMBER_ID_REQUIRED for static members
    assert r.error is E.none and r.member_id == "restarted-m3"
    assert r.generation_id == gen and r.leader == ids[0] and r.members == ()
    group = h.group("g")
    assert group.state is S.STABLE  # same protocol: no rebalance
    assert group.static_members == {"i0": ids[0], "i1": "restarted-m3"}
    assert len(group_records(h)) == records_before + 1  # the new member id is persisted
    assert h.heartbeat(ids[1], gen, instance="i1") is E.fenced_instance_id
    assert h.sync(ids[1], gen, instance="i1").error is E.fenced_instance_id
    assert h.join(ids[1], instance="i1").error is E.fenced_instance_id
    assert h.heartbeat("restarted-m3", gen, instance="i1") is E.none
    # The replacement keeps the old assignment.
    assert h.sync("restarted-m3", gen, instance="i1").assignment == f"assign-{ids[1]}".encode()


def test_static_leader_replacement_v9_skips_assignment() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", "i1"])
    r = h.join(instance="i0", client="new")
    assert r.leader == r.member_id == "new-m3" and r.skip_assignment
    assert [m.member_id for m in r.members] == ["new-m3", ids[1]]
    old = h.join(instance="i0", client="older", version=8)
    assert old.leader == "new-m3" and old.member_id == "older-m4" and not old.skip_assignment
    assert old.members == ()


def test_static_replacement_fences_parked_requests() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", "i1"])
    parked = h.join(ids[1], instance="i1", protocols=(("range", subscription("t2")),))
    h.join(ids[0], instance="i0")
    assert h.answer(parked).error is E.none  # all rejoined -> completed
    gen2 = h.answer(parked).generation_id
    old_sync = h.sync(ids[1], gen2, instance="i1")  # parked: the leader has not synced
    r = h.join(instance="i1", client="new")
    assert h.answer(old_sync) == SyncGroupReply(E.fenced_instance_id)
    assert isinstance(r, Pending)  # CompletingRebalance: replacement forces a rebalance
    assert h.group("g").state is S.PREPARING_REBALANCE


def test_static_member_survives_rebalance_timeout_until_session_expiry() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, instances=["i0", "i1"])
    leader = h.join(ids[0], instance="i0", session=60_000)
    for _ in range(3):  # the static follower heartbeats but does not rejoin
        h.advance(9_000)
        assert h.heartbeat(ids[1], gen, instance="i1") is E.rebalance_in_progress
    h.advance(3_000)  # rebalance timeout: the static follower is kept in the generation
    r = h.answer(leader)
    assert r.generation_id == gen + 1
    assert [m.member_id for m in r.members] == ids
    assert h.heartbeat(ids[1], gen, instance="i1") is E.illegal_generation


def test_no_static_instance_shared_after_unknown_instance_rejoin() -> None:
    h = Harness()
    ids, gen = h.stable_group(1, instances=["i0"])
    assert h.join(ids[0], instance="other").error is E.unknown_member_id


# -- LeaveGroup ----------------------------------------------------------------------------


def test_leave_group_batch() -> None:
    h = Harness()
    ids, gen = h.stable_group(3, instances=[None, None, "i2"])
    reply = h.leave(
        LeaveMember(ids[0]),
        LeaveMember("", "i2"),
        LeaveMember("zzz"),
        LeaveMember("zombie", "i2"),  # already gone: unknown
    )
    assert [m.error for m in reply.members] == [
        E.none,
        E.none,
        E.unknown_member_id,
        E.unknown_member_id,
    ]
    group = h.group("g")
    assert list(group.members) == [ids[1]] and group.leader_id == ids[1]
    assert group.state is S.PREPARING_REBALANCE
    r = h.join(ids[1])
    assert r.generation_id == gen + 1 and r.leader == ids[1]


def test_leave_group_errors() -> None:
    h = Harness()
    ids, gen = h.stable_group(1, instances=["i0"])
    assert h.leave(LeaveMember("x"), group="").error is E.invalid_group_id
    r = h.leave(LeaveMember("x"), group="unknown")
    assert r.error is E.none and r.members[0].error is E.unknown_member_id
    assert h.leave(LeaveMember("zombie", "i0")).members[0].error is E.fenced_instance_id
    pending = h.join(client="p").member_id
    assert h.leave(LeaveMember(pending)).members[0].error is E.none
    assert not h.group("g").pending_members
    assert h.leave(LeaveMember(ids[0], "i0")).members[0].error is E.none
    group = h.group("g")
    assert group.state is S.EMPTY and group.generation_id == gen + 1


def test_leave_answers_parked_join_of_removed_member() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    parked = h.join(ids[0])  # the leader rejoins: parked until the follower rejoins
    h.leave(LeaveMember(ids[0]))
    assert h.answer(parked) == JoinGroupReply(E.unknown_member_id)


# -- admin and protocol opacity ------------------------------------------------------------


def test_list_and_describe_groups() -> None:
    h = Harness()
    ids, gen = h.stable_group(2, group="a")
    h.join(group="b", ptype="connect", protocols=(("sessioned", b"cfg"),), version=3)
    h.commit({("t", 0): 5}, group="simple")
    listed = h.coord.list_groups()
    assert {(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed.groups} == {
        ("a", "consumer", "Stable", "classic"),
        ("b", "connect", "PreparingRebalance", "classic"),
        ("simple", "", "Empty", "classic"),
    }
    assert [g.group_id for g in h.coord.list_groups(["stable", "EMPTY"]).groups] == ["a", "simple"]
    assert h.coord.list_groups(types_filter=["consumer"]).groups == ()
    assert len(h.coord.list_groups(types_filter=["Classic"]).groups) == 3
    a, b, missing, missing6 = h.coord.describe_groups(["a", "b", "zz"]) + h.coord.describe_groups(
        ["zz"], api_version=6
    )
    assert (a.state, a.protocol_type, a.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in a.members] == [
        (m, subscription("t1"), f"assign-{m}".encode()) for m in ids
    ]
    assert (b.state, b.protocol_data) == ("PreparingRebalance", "")
    assert [(m.metadata, m.assignment) for m in b.members] == [(b"", b"")]
    assert (missing.error, missing.state) == (E.none, "Dead")
    assert missing6.error is E.group_id_not_found


def test_connect_style_protocol_is_opaque() -> None:
    h = Harness()
    proto = (("sessioned", b"\x00\x01worker-config"), ("default", b"legacy"))
    r1 = h.join(group="connect-cluster", ptype="connect", protocols=proto, client="w1")
    parked = h.join(r1.member_id, group="connect-cluster", ptype="connect", protocols=proto)
    h.advance(3_000)
    r = h.answer(parked)
    assert r.protocol_type == "connect" and r.protocol_name == "sessioned"
    assert r.members[0].metadata == b"\x00\x01worker-config"


def test_next_deadline_tracks_timers() -> None:
    h = Harness()
    assert h.coord.next_deadline() == h.now + h.config.offsets_retention_check_interval_ms
    h.join(h.join().member_id)
    assert h.coord.next_deadline() == h.now + 3_000


def test_abandon_answers_parked_requests() -> None:
    h = Harness()
    ids, gen = h.stable_group(2)
    parked = h.join(ids[0])
    replies = h.coord.abandon(E.not_coordinator)
    assert replies == [(parked.token, JoinGroupReply(E.not_coordinator, member_id=ids[0]))]
    assert not h.coord.loaded


def test_failed_replies_maps_every_reply() -> None:
    h = Harness()
    ids = [h.join(client=f"c{i}").member_id for i in range(2)]
    parked = [h.join(m) for m in ids]
    h.advance(6_000)  # the second member extended the initial delay
    gen = h.answer(parked[0]).generation_id
    follower = h.sync(ids[1], gen)
    step = h.coord.sync_group(SyncGroupRequest("g", gen, ids[0], assignments=()), h.now)
    assert failed_replies(step, E.not_coordinator) == [
        (None, SyncGroupReply(E.not_coordinator)),
        (follower.token, SyncGroupReply(E.not_coordinator)),
    ]


# -- group.max.size (Kafka's acceptJoiningMember) ------------------------------------------


def _stable(h: Harness, *clients: str) -> list[str]:
    """A Stable generation 1 of one member per client: their member ids."""
    ids = [h.join(client=c).member_id for c in clients]
    parked = [h.join(mid) for mid in ids]
    while any(h.answer(p) is None for p in parked):
        h.advance(1_000)
    replies = [h.answer(p) for p in parked]
    assert all(r.error is E.none for r in replies)
    leader = replies[0].leader
    assert h.sync(leader, 1, {m: b"" for m in ids}).error is E.none
    for m in ids:
        if m != leader:
            assert h.sync(m, 1).error is E.none
    assert h.group().state is S.STABLE
    return ids


def test_group_max_size_refuses_a_new_member_of_a_full_group() -> None:
    h = Harness(GroupConfig(classic_max_size=2))
    a, b = _stable(h, "a", "b")
    r = h.join(client="c")
    assert r == JoinGroupReply(E.group_max_size_reached, member_id="")
    assert h.group().state is S.STABLE and set(h.group().members) == {a, b}
    assert not h.group().pending_members
    # The members themselves still rejoin.
    assert isinstance(h.join(a), Pending)


def test_group_max_size_counts_rejoined_members_while_preparing_a_rebalance() -> None:
    """A lowered limit: the first members to rejoin stay, the last one is left out (and
    its leaving completes the join phase for the others)."""
    h = Harness(GroupConfig(classic_max_size=3))
    a, b, c = _stable(h, "a", "b", "c")
    h.config = GroupConfig(classic_max_size=2)
    h.reload()  # a restart with a lower limit
    pa = h.join(a)  # starts a rebalance
    assert h.group().state is S.PREPARING_REBALANCE
    pb = h.join(b)
    assert h.join(c) == JoinGroupReply(E.group_max_size_reached, member_id="")
    ra, rb = h.answer(pa), h.answer(pb)
    assert ra.error is E.none and rb.error is E.none and ra.generation_id == 2
    assert set(h.group().members) == {a, b}


def test_group_max_size_accepts_anyone_into_an_empty_group() -> None:
    h = Harness(GroupConfig(classic_max_size=1))
    mid = h.join(client="a").member_id
    parked = h.join(mid)
    h.advance(3_000)
    assert h.answer(parked).error is E.none
    assert h.join(client="b") == JoinGroupReply(E.group_max_size_reached, member_id="")
