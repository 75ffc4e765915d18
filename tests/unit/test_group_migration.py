"""KIP-848 online migration (group.consumer.migration.policy) as a pure state machine:
a live classic group upgraded by a consumer-protocol member, classic members served by
the consumer group, the downgrade when the last consumer-protocol member goes, and the
records that carry it all through a reload."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from oncelog.group import GroupConfig, GroupState, JoinGroupReply, LeaveMember, SyncGroupReply
from oncelog.group.consumer_embedded import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    version,
)
from oncelog.group.consumer_records import decode_key, group_records
from oncelog.group.consumer_state import ClassicMeta, ConsumerGroup, ConsumerMember, TopicInfo
from oncelog.group.messages import (
    ConsumerHeartbeatReply,
    ConsumerHeartbeatRequest,
    DescribedConsumerGroup,
)
from oncelog.group.offsets_codec import GroupKey, GroupValue, decode_record
from tests.unit.test_group_support import Harness

E = ErrorCode
T1 = uuid.UUID(int=1)
TOPICS = {"t1": TopicInfo(T1, 4)}
SUB = encode_subscription(("t1",), subscription_version=1)


def harness(policy: str = "bidirectional", **kw: Any) -> Harness:
    cfg = GroupConfig(
        consumer_migration_policy=policy,
        consumer_session_timeout_ms=10_000,
        consumer_heartbeat_interval_ms=1_000,
        **kw,
    )
    return Harness(cfg)


def classic_pair(h: Harness) -> tuple[str, str, int]:
    """Two classic members (eager "range"), t1-0/1 and t1-2/3: (ids..., generation)."""
    parked = []
    for client in ("c0", "c1"):
        r = h.join(protocols=(("range", SUB),), client=client)
        assert r.error is E.member_id_required
        parked.append(h.join(r.member_id, protocols=(("range", SUB),), client=client))
    while any(h.answer(p) is None for p in parked):
        h.advance(h.config.initial_rebalance_delay_ms)
    replies = [h.answer(p) for p in parked]
    assert all(isinstance(r, JoinGroupReply) and r.error is E.none for r in replies), replies
    a, b = (r.member_id for r in replies)
    gen = replies[0].generation_id
    assignments = {
        a: encode_assignment({"t1": frozenset({0, 1})}, 1),
        b: encode_assignment({"t1": frozenset({2, 3})}, 1),
    }
    leader = replies[0].leader
    assert h.sync(leader, gen, assignments).error is E.none
    other = b if leader == a else a
    assert h.sync(other, gen).error is E.none
    assert h.group().state is GroupState.STABLE
    return a, b, gen


def chb(
    h: Harness, member: str, epoch: int, *, owned: tuple[int, ...] | None = None
) -> ConsumerHeartbeatReply:
    req = ConsumerHeartbeatRequest(
        group_id="g",
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout_ms=5_000 if epoch == 0 else -1,
        subscribed_topic_names=("t1",) if epoch == 0 else None,
        owned=() if epoch == 0 else (None if owned is None else ((T1, owned),)),
    )
    reply = h.run(h.coord.consumer_heartbeat(req, TOPICS, h.now))
    assert isinstance(reply, ConsumerHeartbeatReply)
    return reply


def rejoin(h: Harness, member: str, owned: frozenset[int] = frozenset()) -> tuple[int, set[int]]:
    """A classic member's JoinGroup + SyncGroup into the consumer group: (generation,
    the partitions SyncGroup hands it)."""
    sub = encode_subscription(("t1",), {"t1": owned} if owned else {}, subscription_version=1)
    j = h.join(member, protocols=(("range", sub),), topics=TOPICS)
    assert isinstance(j, JoinGroupReply) and j.error is E.none, j
    assert (j.leader, j.protocol_type, j.protocol_name, j.members) == ("", "consumer", "range", ())
    s = h.sync(member, j.generation_id, ptype="consumer", pname="range")
    assert isinstance(s, SyncGroupReply) and s.error is E.none, s
    return j.generation_id, set(decode_assignment(s.assignment).get("t1", frozenset()))


def consumer_group(h: Harness) -> ConsumerGroup:
    cg = h.group().consumer
    assert cg is not None
    return cg


def upgraded(h: Harness) -> tuple[str, str, int]:
    """The pair, then consumer-protocol member "n" joins: the group is converted."""
    a, b, gen = classic_pair(h)
    r = chb(h, "n", 0)
    assert r.error is E.none and r.member_epoch == gen + 1
    assert r.assignment == ()  # everything is still held by the classic members
    return a, b, gen


def settle(h: Harness, a: str, b: str) -> dict[str, set[int]]:
    """Drive the classic members (heartbeat, rejoin) and "n" until nobody waits."""
    owned: dict[str, set[int]] = {a: {0, 1}, b: {2, 3}, "n": set()}
    gens = {
        a: consumer_group(h).members[a].member_epoch,
        b: consumer_group(h).members[b].member_epoch,
    }
    for _ in range(6):
        for m in (a, b):
            if h.heartbeat(m, gens[m]) is E.rebalance_in_progress:
                owned[m] = set()  # eager: revokes everything, then rejoins
                gens[m], got = rejoin(h, m)
                owned[m] = got
        r = chb(h, "n", consumer_group(h).members["n"].member_epoch, owned=tuple(owned["n"]))
        if r.assignment is not None:
            owned["n"] = {p for _, ps in r.assignment for p in ps}
        h.advance(100)
    return owned


# -- upgrade ------------------------------------------------------------------------------


def test_a_consumer_member_upgrades_a_live_classic_group() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    cg = consumer_group(h)
    assert cg.group_epoch == gen + 1 and cg.assignment_epoch == gen + 1
    assert set(cg.members) == {a, b, "n"}
    for mid, parts in ((a, {0, 1}), (b, {2, 3})):
        m = cg.members[mid]
        assert m.classic is not None and m.classic.session_timeout_ms == 10_000
        assert (m.member_epoch, m.assigned) == (gen, {T1: frozenset(parts)})
    assert h.group().members == {} and h.group().state is GroupState.EMPTY
    # The classic group record got a tombstone; the consumer records follow it.
    kinds = [_kind(key, value) for _, key, value, _ in h.log]
    tomb = kinds.index(("group", None))
    assert kinds[tomb + 1 :] and all(k == "consumer" for k, _ in kinds[tomb + 1 :])
    # Describe through both APIs.
    described = h.coord.consumer_group_describe(["g"])[0]
    assert isinstance(described, DescribedConsumerGroup) and described.error is E.none
    assert {m.member_id for m in described.members} == {a, b, "n"}
    assert [g.group_type for g in h.coord.list_groups().groups] == ["consumer"]


def test_classic_members_rejoin_and_every_partition_has_exactly_one_owner() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    assert h.heartbeat(a, gen) is E.rebalance_in_progress  # epoch behind the group's
    owned = settle(h, a, b)
    everything = sorted(p for ps in owned.values() for p in ps)
    assert everything == [0, 1, 2, 3]
    assert all(owned.values()), owned  # uniform: 2/1/1
    cg = consumer_group(h)
    assert cg.state().value == "Stable"
    for m in (a, b):
        assert h.heartbeat(m, cg.members[m].member_epoch) is E.none


def test_a_classic_member_waits_for_partitions_another_still_holds() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    gen_a, got_a = rejoin(h, a)  # b still holds 2 and 3
    cg = consumer_group(h)
    assert gen_a == cg.group_epoch
    target = cg.target[a][T1]
    assert got_a == set(target) - {2, 3}
    if target & {2, 3}:
        assert h.heartbeat(a, gen_a) is E.none  # still waiting for b
        rejoin(h, b)
        assert h.heartbeat(a, gen_a) is E.rebalance_in_progress  # now free: rejoin
        assert rejoin(h, a) == (gen_a, set(target))


def test_upgrade_answers_parked_requests_with_rebalance_in_progress() -> None:
    h = harness()
    a, b, gen = classic_pair(h)
    changed = (("range", SUB), ("roundrobin", SUB))
    parked = h.join(a, protocols=changed)  # a new generation: parked for b
    assert h.answer(parked) is None
    assert chb(h, "n", 0).error is E.none
    assert h.answer(parked).error is E.rebalance_in_progress


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "DISABLED"])
def test_upgrade_disabled_by_policy(policy: str) -> None:
    h = harness(policy)
    a, b, gen = classic_pair(h)
    assert chb(h, "n", 0).error is E.group_id_not_found
    assert h.group().consumer is None and h.heartbeat(a, gen) is E.none


def test_upgrade_refused_over_the_size_limit_or_for_other_protocol_types() -> None:
    h = harness(consumer_max_size=1)
    classic_pair(h)
    assert chb(h, "n", 0).error is E.group_id_not_found
    h = harness(consumer_max_size=2)  # no room for the joining member: stays classic
    classic_pair(h)
    assert chb(h, "n", 0).error is E.group_max_size_reached
    assert h.group().consumer is None and len(h.group().members) == 2
    h = harness()
    r = h.join(ptype="connect", protocols=(("v1", b"x"),), group="g")
    h.join(r.member_id, ptype="connect", protocols=(("v1", b"x"),))
    h.advance(0)
    assert chb(h, "n", 0).error is E.group_id_not_found


def test_group_max_size_refuses_new_members() -> None:
    h = harness(consumer_max_size=3)
    upgraded(h)
    assert chb(h, "n2", 0).error is E.group_max_size_reached
    r = h.join(protocols=(("range", SUB),), topics=TOPICS)
    assert r.error is E.group_max_size_reached


# -- classic members in a consumer group ---------------------------------------------------


def test_a_classic_member_joins_a_consumer_group() -> None:
    h = harness()
    assert chb(h, "n", 0).error is E.none
    r = h.join(protocols=(("range", SUB),), topics=TOPICS)
    assert r.error is E.member_id_required
    gen, got = rejoin(h, r.member_id)
    cg = consumer_group(h)
    assert gen == cg.group_epoch == 2
    assert cg.members[r.member_id].classic is not None
    assert got == set()  # n must revoke first
    bad = h.join(protocols=(("roundrobin", SUB),), topics=TOPICS)
    assert bad.error is E.inconsistent_group_protocol  # not supported by the classic member
    assert h.join(ptype="connect", topics=TOPICS).error is E.inconsistent_group_protocol


def test_classic_requests_validate_member_generation_and_protocol() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    assert h.heartbeat("nobody", gen) is E.unknown_member_id
    assert h.heartbeat("n", 2) is E.unknown_member_id  # not a classic member
    assert h.heartbeat(a, gen + 5) is E.illegal_generation
    assert h.sync(a, gen + 5).error is E.illegal_generation
    assert h.sync(a, gen, ptype="consumer", pname="roundrobin").error is (
        E.inconsistent_group_protocol
    )
    assert h.sync(a, gen).error is E.rebalance_in_progress  # its epoch is behind
    leave = h.leave(LeaveMember("n"), LeaveMember("nobody"))
    assert [m.error for m in leave.members] == [E.unknown_member_id, E.unknown_member_id]


def test_classic_member_that_does_not_rejoin_in_time_is_fenced() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    assert h.heartbeat(a, gen) is E.rebalance_in_progress  # join timer: 30 s
    for step in (9_000, 9_000, 9_000, 2_999):
        h.advance(step)
        assert h.heartbeat(a, gen) is E.rebalance_in_progress  # session kept alive
        chb(h, "n", consumer_group(h).members["n"].member_epoch)
    h.advance(1)  # its rebalance timeout after it was asked to rejoin
    assert a not in consumer_group(h).members and "n" in consumer_group(h).members
    assert h.heartbeat(a, gen) is E.unknown_member_id


def test_classic_leave_removes_the_member_and_bumps_the_epoch() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    reply = h.leave(LeaveMember(a))
    assert [(m.member_id, m.error) for m in reply.members] == [(a, E.none)]
    cg = consumer_group(h)
    assert set(cg.members) == {b, "n"} and cg.group_epoch == gen + 2


def test_offset_commits_of_classic_members_use_their_generation() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    assert h.commit({("t1", 0): 5}, generation=gen, member_id=a, version=8) == {("t1", 0): E.none}
    assert h.commit({("t1", 0): 6}, generation=gen - 1, member_id=a) == {
        ("t1", 0): E.illegal_generation
    }
    # KIP-447: a zombie's transactional commit with an old generation is fenced.
    assert h.txn_commit({("t1", 0): 7}, 42, generation=gen - 1, member_id=a) == {
        ("t1", 0): E.illegal_generation
    }
    assert h.txn_commit({("t1", 0): 7}, 42, generation=gen, member_id=a) == {("t1", 0): E.none}
    gen_a, _ = rejoin(h, a)
    assert h.txn_commit({("t1", 0): 8}, 42, generation=gen, member_id=a) == {
        ("t1", 0): E.illegal_generation
    }
    assert h.txn_commit({("t1", 0): 8}, 42, generation=gen_a, member_id=a) == {("t1", 0): E.none}
    # The consumer-protocol member keeps its own error.
    assert h.commit({("t1", 1): 1}, generation=0, member_id="n") == {
        ("t1", 1): E.stale_member_epoch
    }


# -- downgrade ------------------------------------------------------------------------------


def test_last_consumer_member_leaving_downgrades_to_a_rebalancing_classic_group() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    settle(h, a, b)
    cg = consumer_group(h)
    epoch = cg.group_epoch
    targets = {m: set(cg.target[m].get(T1, ())) for m in (a, b)}
    r = chb(h, "n", -1)
    assert (r.error, r.member_epoch) == (E.none, -1)
    g = h.group()
    assert g.consumer is None
    assert g.state is GroupState.PREPARING_REBALANCE
    assert g.generation_id == epoch and g.protocol_name == "range"
    assert set(g.members) == {a, b}
    for m in (a, b):  # the target assignment, in the member's own version
        assert set(decode_assignment(g.members[m].assignment)["t1"]) == targets[m]
    # Consumer records: all tombstoned; then the classic record (Stable, with members).
    tail = [_kind(key, value) for _, key, value, _ in h.log][-12:]
    assert tail[-1][0] == "group" and tail[-1][1] is not None
    assert tail[-1][1].generation_id == epoch and len(tail[-1][1].members) == 2
    live = {k: v for _, k, v, _ in h.log if _kind(k, v)[0] == "consumer"}
    assert all(v is None for v in live.values())
    assert [g.group_type for g in h.coord.list_groups().groups] == ["classic"]
    # The classic members rejoin the classic way.
    for m in (a, b):
        assert h.heartbeat(m, epoch) is E.rebalance_in_progress
    ja = h.join(a, protocols=(("range", SUB),))
    jb = h.join(b, protocols=(("range", SUB),))
    h.advance(0)
    assert h.answer(ja).generation_id == h.answer(jb).generation_id == epoch + 1


def test_downgrade_on_session_expiry_of_the_consumer_member() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    for _ in range(11):
        h.advance(1_000)
        h.heartbeat(a, gen)
        h.heartbeat(b, gen)
    assert h.group().consumer is None and set(h.group().members) == {a, b}


def test_describe_groups_does_not_find_a_consumer_group() -> None:
    """Kafka 4.x: DescribeGroups describes classic groups only; a consumer group (here a
    mixed one) is a Dead group to v0-v5 and GROUP_ID_NOT_FOUND to v6, which is what makes
    clients describe it with ConsumerGroupDescribe instead."""
    h = harness()
    a, b, gen = classic_pair(h)
    (before,) = h.coord.describe_groups(["g"], api_version=6)
    assert (before.error, before.state, len(before.members)) == (E.none, "Stable", 2)
    upgraded_epoch = chb(h, "n", 0).member_epoch
    assert upgraded_epoch == gen + 1
    (v5,) = h.coord.describe_groups(["g"], api_version=5)
    (v6,) = h.coord.describe_groups(["g"], api_version=6)
    assert (v5.error, v5.state, v5.members) == (E.none, "Dead", ())
    assert (v6.error, v6.state, v6.members) == (E.group_id_not_found, "Dead", ())


def test_no_downgrade_when_the_classic_members_exceed_group_max_size() -> None:
    """Kafka's validateOnlineDowngradeWithFencedMember: more classic members than
    group.max.size would allow stay in the consumer group."""
    h = harness()
    a, b, gen = upgraded(h)
    h.config = dataclasses.replace(h.config, classic_max_size=1)
    h.reload()  # a restart with the lower limit
    assert chb(h, "n", -1).error is E.none
    cg = consumer_group(h)
    assert set(cg.members) == {a, b} and h.group().consumer is cg


def test_no_downgrade_when_the_policy_only_upgrades() -> None:
    h = harness("upgrade")
    a, b, gen = upgraded(h)
    assert chb(h, "n", -1).error is E.none
    cg = consumer_group(h)
    assert set(cg.members) == {a, b} and cg.group_epoch == gen + 2


def test_disabled_policy_still_takes_classic_joins_but_never_converts() -> None:
    """Kafka routes a classic JoinGroup to a non-empty consumer group whatever the policy;
    the policy only governs the conversions."""
    h = harness("disabled")
    assert chb(h, "n", 0).error is E.none
    r = h.join(protocols=(("range", SUB),), topics=TOPICS)
    gen, _ = rejoin(h, r.member_id)
    assert chb(h, "n", -1).error is E.none
    cg = consumer_group(h)
    assert set(cg.members) == {r.member_id} and h.group().members == {}


def test_the_last_member_leaving_keeps_an_empty_consumer_group() -> None:
    h = harness()
    assert chb(h, "n", 0).error is E.none
    assert chb(h, "n", -1).error is E.none
    assert consumer_group(h).members == {}


# -- records and reload ----------------------------------------------------------------------


def test_a_mixed_group_survives_a_reload() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    rejoin(h, a)
    before = consumer_group(h)
    snapshot = {
        m.member_id: (m.member_epoch, m.assigned, m.classic) for m in before.members.values()
    }
    h.reload()
    after = consumer_group(h)
    assert {
        m.member_id: (m.member_epoch, m.assigned, m.classic) for m in after.members.values()
    } == snapshot
    assert after.group_epoch == before.group_epoch
    assert h.group().members == {}  # the classic record was tombstoned
    # The reloaded coordinator goes on serving the classic members.
    assert h.heartbeat(b, gen) is E.rebalance_in_progress
    assert h.heartbeat(a, snapshot[a][0]) in (E.none, E.rebalance_in_progress)


def test_a_downgraded_group_survives_a_reload() -> None:
    h = harness()
    a, b, gen = upgraded(h)
    chb(h, "n", -1)
    epoch = h.group().generation_id
    h.reload()
    g = h.group()
    assert g.consumer is None and g.state is GroupState.STABLE and set(g.members) == {a, b}
    assert g.generation_id == epoch


def test_classic_member_metadata_record_round_trips() -> None:
    cg = ConsumerGroup("g")
    m = ConsumerMember("m", client_id="c", subscribed_topic_names=("t1",))
    m.classic = ClassicMeta(45_000, (("range", SUB), ("roundrobin", b"\x00\x01")))
    cg.members["m"] = m
    h = Harness()
    h.log.extend((0, key, value, -1) for key, value in group_records(cg).items())
    h.reload()
    loaded = consumer_group(h).members["m"]
    assert loaded.classic == m.classic


def _kind(key: bytes, value: bytes | None) -> tuple[str, GroupValue | None]:
    if key[:2] in (b"\x00\x00", b"\x00\x01", b"\x00\x02"):
        k, v = decode_record(key, value)
        if isinstance(k, GroupKey):
            assert v is None or isinstance(v, GroupValue)
            return "group", v
        return "offset", None
    decode_key(key)
    return "consumer", None


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    h = harness()
    req = ConsumerHeartbeatRequest(
        group_id="g",
        member_id="s",
        member_epoch=0,
        instance_id="i1",
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=("t1",),
        owned=(),
    )
    assert h.run(h.coord.consumer_heartbeat(req, TOPICS, h.now)).error is E.none
    r = h.join(protocols=(("range", SUB),), topics=TOPICS)
    x = r.member_id
    rejoin(h, x)
    epoch = consumer_group(h).group_epoch
    # The static instance comes back speaking the classic protocol, with a new member id.
    j = h.join(instance="i1", protocols=(("range", SUB),), topics=TOPICS)
    assert isinstance(j, JoinGroupReply) and j.error is E.none
    g = h.group()
    assert g.consumer is None and g.state is GroupState.STABLE  # no rebalance
    assert set(g.members) == {x, j.member_id} and g.static_members == {"i1": j.member_id}
    assert g.generation_id == epoch
    assert [g.group_type for g in h.coord.list_groups().groups] == ["classic"]


@pytest.mark.parametrize("v", [0, 1, 2, 3])
def test_embedded_subscription_and_assignment_codec(v: int) -> None:
    raw = encode_subscription(
        ("b", "a"), {"a": frozenset({3, 1})}, subscription_version=v, rack_id="r1"
    )
    sub = decode_subscription(raw)
    assert (sub.version, sub.topics) == (v, ("b", "a"))
    assert sub.owned == ({"a": frozenset({1, 3})} if v >= 1 else {})
    assert sub.rack_id == ("r1" if v >= 3 else None)
    assigned = encode_assignment({"a": frozenset({2, 0}), "b": frozenset()}, v)
    assert version(assigned) == v
    assert decode_assignment(assigned) == {"a": frozenset({0, 2})}
    assert decode_assignment(b"") == {}
    assert version(encode_assignment({}, 7)) == 3  # newer subscriptions get the newest we know
