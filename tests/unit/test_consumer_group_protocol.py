"""The KIP-848 consumer group protocol as a pure state machine: heartbeats in, replies out,
with an injected clock and topic metadata."""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from oncelog.group import (
    CommitPartition,
    GroupConfig,
    GroupCoordinator,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.consumer_records import REGULAR_EXPRESSION, ConsumerKey, encode_key
from oncelog.group.consumer_state import TopicInfo
from oncelog.group.messages import (
    ConsumerHeartbeatReply,
    ConsumerHeartbeatRequest,
    GroupStep,
    OffsetDeleteReply,
    OffsetDeleteRequest,
    ResolveRegexes,
)
from oncelog.group.topic_regex import resolve_topic_regexes

E = ErrorCode
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"a": TopicInfo(T1, 6), "b": TopicInfo(T2, 2)}
CFG = GroupConfig(consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=1_000)


def coordinator() -> GroupCoordinator:
    c = GroupCoordinator(CFG)
    c.finish_load(0)
    return c


def hb(
    c: GroupCoordinator,
    member: str,
    epoch: int,
    now: int,
    *,
    topics: tuple[str, ...] | None = None,
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None,
    instance: str | None = None,
    assignor: str | None = None,
    meta: dict[str, TopicInfo] | None = None,
    group: str = "g",
) -> ConsumerHeartbeatReply:
    req = ConsumerHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        rebalance_timeout_ms=5_000 if epoch == 0 else -1,
        subscribed_topic_names=topics,
        server_assignor=assignor,
        owned=() if epoch == 0 else owned,
    )
    reply = c.consumer_heartbeat(req, TOPICS if meta is None else meta, now).reply
    assert isinstance(reply, ConsumerHeartbeatReply)
    return reply


def parts(reply: ConsumerHeartbeatReply) -> dict[uuid.UUID, tuple[int, ...]]:
    assert reply.assignment is not None
    return dict(reply.assignment)


def test_first_member_gets_every_partition_at_epoch_1() -> None:
    c = coordinator()
    r = hb(c, "m1", 0, 0, topics=("a",))
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (
        E.none,
        "m1",
        1,
        1_000,
    )
    assert parts(r) == {T1: (0, 1, 2, 3, 4, 5)}
    again = hb(c, "m1", 1, 100)
    assert (again.error, again.member_epoch, again.assignment) == (E.none, 1, None)


def test_second_member_waits_for_the_first_to_revoke() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    r2 = hb(c, "m2", 0, 10, topics=("a",))
    # m2 is at epoch 2 but its partitions are still m1's: nothing yet.
    assert (r2.member_epoch, parts(r2)) == (2, {})
    r1 = hb(c, "m1", 1, 20)
    # m1 must revoke 3 partitions before moving to epoch 2.
    assert (r1.member_epoch, parts(r1)) == (1, {T1: (0, 1, 2)})
    still = hb(c, "m1", 1, 30, owned=((T1, (0, 1, 2, 3, 4, 5)),))
    assert (still.member_epoch, still.assignment) == (1, None)
    done = hb(c, "m1", 1, 40, owned=((T1, (0, 1, 2)),))
    assert (done.member_epoch, done.assignment) == (2, None)
    r2 = hb(c, "m2", 2, 50)
    assert (r2.member_epoch, parts(r2)) == (2, {T1: (3, 4, 5)})
    d = c.consumer_group_describe(["g"])[0]
    assert (d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        "Stable",
        2,
        2,
        "uniform",
    )


def test_member_that_does_not_revoke_in_time_is_fenced() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    hb(c, "m2", 0, 10, topics=("a",))
    hb(c, "m1", 1, 20)  # asked to revoke; rebalance timeout 5 s
    c.tick(20 + 5_000)
    assert hb(c, "m1", 1, 5_030).error is E.unknown_member_id
    r2 = hb(c, "m2", 2, 5_040)
    assert (r2.member_epoch, parts(r2)) == (3, {T1: (0, 1, 2, 3, 4, 5)})


def test_session_timeout_removes_a_silent_member() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    hb(c, "m2", 0, 0, topics=("a",))
    c.tick(9_999)
    assert len(c.consumer_group_describe(["g"])[0].members) == 2
    hb(c, "m2", 2, 5_000)
    c.tick(10_000)
    described = c.consumer_group_describe(["g"])[0]
    assert [m.member_id for m in described.members] == ["m2"]


def test_wrong_epochs_and_unknown_members() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    assert hb(c, "m1", 7, 1).error is E.fenced_member_epoch
    assert hb(c, "nobody", 1, 1).error is E.unknown_member_id
    assert hb(c, "m1", 1, 1, group="other").error is E.group_id_not_found
    bad = c.consumer_heartbeat(ConsumerHeartbeatRequest("g", "m3", 0), TOPICS, 1).reply
    assert isinstance(bad, ConsumerHeartbeatReply) and bad.error is E.invalid_request
    unknown = hb(c, "m3", 0, 1, topics=("a",), assignor="sticky")
    assert unknown.error is E.unsupported_assignor


def test_previous_epoch_is_accepted_after_a_lost_response() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))  # epoch 1
    hb(c, "m1", 1, 1, topics=("a", "b"))  # epoch 2: the response is "lost"
    r = hb(c, "m1", 1, 2, owned=((T1, (0, 1, 2, 3, 4, 5)),))
    assert (r.error, r.member_epoch) == (E.none, 2)


def test_leave_bumps_the_epoch_and_frees_partitions() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    hb(c, "m2", 0, 0, topics=("a",))
    hb(c, "m1", 1, 1, owned=((T1, (0, 1, 2)),))
    left = hb(c, "m1", -1, 2)
    assert (left.error, left.member_epoch) == (E.none, -1)
    r2 = hb(c, "m2", 2, 3)
    assert (r2.member_epoch, parts(r2)) == (3, {T1: (0, 1, 2, 3, 4, 5)})


def test_static_member_rejoins_with_its_assignment() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",), instance="i1")
    hb(c, "m2", 0, 0, topics=("a",), instance="i2")
    hb(c, "m1", 1, 1, owned=((T1, (0, 1, 2)),), instance="i1")
    assert hb(c, "m3", 0, 2, topics=("a",), instance="i1").error is E.unreleased_instance_id
    assert hb(c, "m1", -2, 3, instance="i1").member_epoch == -2
    back = hb(c, "m3", 0, 4, topics=("a",), instance="i1")
    assert (back.error, back.member_id, back.member_epoch, parts(back)) == (
        E.none,
        "m3",
        2,
        {T1: (0, 1, 2)},
    )
    assert c.consumer_group_describe(["g"])[0].group_epoch == 2  # no rebalance


def test_new_partitions_bump_the_group_epoch() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    r = hb(c, "m1", 1, 1, meta={"a": TopicInfo(T1, 8), "b": TopicInfo(T2, 2)})
    assert (r.member_epoch, parts(r)) == (2, {T1: (0, 1, 2, 3, 4, 5, 6, 7)})


def test_range_assignor_by_vote() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a", "b"), assignor="range")
    hb(c, "m2", 0, 0, topics=("a", "b"), assignor="range")
    hb(c, "m1", 1, 1, owned=((T1, (0, 1, 2)), (T2, (0,))))
    target = {
        m.member_id: {t.topic_name: t.partitions for t in m.target_assignment}
        for m in c.consumer_group_describe(["g"])[0].members
    }
    assert target == {"m1": {"a": (0, 1, 2), "b": (0,)}, "m2": {"a": (3, 4, 5), "b": (1,)}}


def test_offset_commits_check_the_member_epoch() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    parts_ = (("a", (CommitPartition(0, 5),)),)

    def commit(member: str, epoch: int, version: int = 9) -> ErrorCode:
        req = OffsetCommitRequest("g", parts_, epoch, member, api_version=version)
        reply = c.offset_commit(req, 1).reply
        return reply.topics[0][1][0][1]  # type: ignore[union-attr]

    def txn_commit(member: str, epoch: int) -> ErrorCode:
        req = TxnOffsetCommitRequest("tx", "g", 7, 0, parts_, epoch, member)
        reply = c.txn_offset_commit(req, 1).reply
        return reply.topics[0][1][0][1]  # type: ignore[union-attr]

    assert commit("m1", 1) is E.none
    assert commit("m1", 0) is E.stale_member_epoch
    assert commit("m1", 1, version=8) is E.unsupported_version
    assert commit("ghost", 1) is E.unknown_member_id
    assert commit("", -1) is E.unknown_member_id  # an admin commit while members consume
    hb(c, "m2", 0, 2, topics=("a",))  # group epoch 2; m1 is still at 1
    assert txn_commit("m1", 1) is E.none
    hb(c, "m1", 1, 3, owned=((T1, (0, 1, 2)),))  # m1 moves to epoch 2
    assert txn_commit("m1", 1) is E.stale_member_epoch  # a zombie of epoch 1 (KIP-447)
    assert txn_commit("m1", 2) is E.none


def test_classic_and_consumer_groups_do_not_mix() -> None:
    c = coordinator()
    join = JoinGroupRequest(
        "classic", "", "consumer", (("range", b""),), 10_000, 10_000, api_version=3
    )
    c.join_group(join, 0)  # parked in the join phase: the classic group has a member
    assert hb(c, "m1", 0, 0, topics=("a",), group="classic").error is E.group_id_not_found
    hb(c, "m1", 0, 0, topics=("a",))
    # A classic member may join the live consumer group (KIP-848 migration; Kafka takes it
    # whatever group.consumer.migration.policy says): first the member id round trip...
    asked = c.join_group(JoinGroupRequest("g", "", "consumer", (("range", b""),), 10_000), 0)
    assert asked.reply.error is E.member_id_required  # type: ignore[union-attr]
    # ...but another protocol type is refused.
    refused = c.join_group(JoinGroupRequest("g", "", "connect", (("v1", b""),), 10_000), 0)
    assert refused.reply.error is E.inconsistent_group_protocol  # type: ignore[union-attr]
    listed = {(g.group_id, g.group_type, g.state) for g in c.list_groups().groups}
    assert ("g", "consumer", "Stable") in listed
    assert [g.group_id for g in c.list_groups(types_filter=["consumer"]).groups] == ["g"]
    hb(c, "m1", -1, 1)
    assert c.list_groups(types_filter=["consumer"]).groups[0].state == "Empty"
    # An empty consumer group can be taken over by the classic protocol.
    c.join_group(JoinGroupRequest("g", "", "consumer", (("range", b""),), 10_000), 2)
    assert c.list_groups(types_filter=["consumer"]).groups == ()


def test_delete_refuses_a_group_with_consumer_members() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    assert c.delete_groups(["g"], 1).reply.results == (("g", E.non_empty_group),)  # type: ignore[union-attr]
    hb(c, "m1", -1, 1)
    assert c.delete_groups(["g"], 2).reply.results == (("g", E.none),)  # type: ignore[union-attr]


def test_offset_fetch_checks_the_member_epoch() -> None:
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))

    def fetch(member: str | None, epoch: int) -> ErrorCode:
        return c.offset_fetch(OffsetFetchRequest("g", None, False, member, epoch)).error

    assert fetch("m1", 1) is E.none
    assert fetch(None, -1) is E.none  # admin tools
    assert fetch("m1", 0) is E.stale_member_epoch
    assert fetch("ghost", 1) is E.unknown_member_id


def resolve(c: GroupCoordinator, step: GroupStep, meta: dict[str, TopicInfo], now: int) -> int:
    """What the shell does after a step: resolve each group's regexes it asked for and
    hand the matches back; how many resolutions ran."""
    for effect in step.effects:
        matched = resolve_topic_regexes(effect.regexes, meta)
        c.regexes_resolved(effect.group_id, matched, meta, now)
    return len(step.effects)


def regex_hb(
    c: GroupCoordinator,
    member: str,
    epoch: int,
    now: int,
    regex: str,
    meta: dict[str, TopicInfo],
    topics: tuple[str, ...] = (),
) -> GroupStep:
    req = ConsumerHeartbeatRequest(
        "g",
        member,
        epoch,
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        owned=() if epoch == 0 else None,
    )
    return c.consumer_heartbeat(req, meta, now)


def test_a_regex_is_resolved_after_its_heartbeat_and_again_for_new_topics() -> None:
    """Kafka's maybeUpdateRegularExpressions: the heartbeat bringing a regex is answered
    without its matches; the resolution (the shell's, later) bumps the group epoch and the
    next heartbeat assigns them. A topic created afterwards is matched by a resolution no
    sooner than 10 s after the last one."""
    c = coordinator()
    meta = {"a1": TopicInfo(T1, 2), "b": TopicInfo(T2, 2)}
    step = regex_hb(c, "m1", 0, 0, "a.*", meta)
    first = step.reply
    assert isinstance(first, ConsumerHeartbeatReply)
    assert (first.member_epoch, parts(first)) == (1, {})
    assert step.effects == [ResolveRegexes("g", frozenset({"a.*"}))]
    assert resolve(c, step, meta, 0) == 1
    assert c.consumer_group_describe(["g"])[0].group_epoch == 2
    later = hb(c, "m1", 1, 1, meta=meta)
    assert (later.member_epoch, parts(later)) == (2, {T1: (0, 1)})
    t3 = uuid.UUID(int=3)
    meta = {**meta, "a2": TopicInfo(t3, 1)}
    step = regex_hb(c, "m1", 2, 9_000, "a.*", meta)  # within 10 s of the last resolution
    assert step.effects == []
    step = regex_hb(c, "m1", 2, 10_001, "a.*", meta)
    assert resolve(c, step, meta, 10_001) == 1
    again = hb(c, "m1", 2, 10_002, meta=meta)
    assert (again.member_epoch, parts(again)) == (3, {T1: (0, 1), t3: (0,)})
    step = regex_hb(c, "m1", 3, 30_000, "a.*", meta)  # nothing new: no resolution
    assert step.effects == []
    bad = ConsumerHeartbeatRequest(
        "g", "m2", 0, rebalance_timeout_ms=5_000, subscribed_topic_regex="(", owned=()
    )
    refused = c.consumer_heartbeat(bad, meta, 30_001).reply
    assert isinstance(refused, ConsumerHeartbeatReply)
    assert refused.error is E.invalid_regular_expression


def test_names_and_a_new_regex_assign_the_names_first_then_the_matches() -> None:
    """librdkafka's test 0045 (resubscribe with a regex and a name): the heartbeat with
    both assigns the named topic at once, the regex's matches a later epoch. Repeating
    the same subscription bumps nothing."""
    c = coordinator()
    step = regex_hb(c, "m1", 0, 0, "^a$", TOPICS, topics=("b",))
    first = step.reply
    assert isinstance(first, ConsumerHeartbeatReply)
    assert (first.error, first.member_epoch, parts(first)) == (E.none, 1, {T2: (0, 1)})
    resolve(c, step, TOPICS, 0)
    second = hb(c, "m1", 1, 1)
    assert (second.member_epoch, parts(second)) == (2, {T1: tuple(range(6)), T2: (0, 1)})
    again = regex_hb(c, "m1", 2, 2, "^a$", TOPICS, topics=("b",))
    assert again.effects == []
    assert isinstance(again.reply, ConsumerHeartbeatReply)
    assert again.reply.member_epoch == 2


def test_changing_to_a_new_regex_keeps_the_epoch_until_it_is_resolved() -> None:
    """A member that subscribed by name adds a regex: that heartbeat keeps its epoch and
    assignment (Kafka bumps only for a regex already resolved); the resolution bumps."""
    c = coordinator()
    assert parts(hb(c, "m1", 0, 0, topics=("b",))) == {T2: (0, 1)}
    step = regex_hb(c, "m1", 1, 1, "a", TOPICS, topics=("b",))
    reply = step.reply
    assert isinstance(reply, ConsumerHeartbeatReply)
    assert (reply.member_epoch, reply.assignment) == (1, None)
    resolve(c, step, TOPICS, 1)
    after = hb(c, "m1", 1, 2)
    assert (after.member_epoch, parts(after)) == (2, {T1: tuple(range(6)), T2: (0, 1)})


def test_a_regex_another_member_resolved_counts_at_once() -> None:
    c = coordinator()
    step = regex_hb(c, "m1", 0, 0, "a", TOPICS)
    resolve(c, step, TOPICS, 0)
    hb(c, "m1", 1, 1)
    joined = regex_hb(c, "m2", 0, 2, "a", TOPICS)
    assert joined.effects == []
    reply = joined.reply
    assert isinstance(reply, ConsumerHeartbeatReply)
    assert reply.member_epoch == 3  # bumped at once: its regex is resolved


def test_the_last_subscriber_leaving_forgets_the_resolution() -> None:
    """Kafka tombstones a regex's resolution when its last subscriber goes, so a member
    rejoining with it at once is not held back by the 10 s between resolutions."""
    c = coordinator()
    step = regex_hb(c, "m1", 0, 0, "a", TOPICS, topics=("b",))
    resolve(c, step, TOPICS, 0)
    hb(c, "m1", 1, 1)
    left = ConsumerHeartbeatRequest("g", "m1", -1)
    step = c.consumer_heartbeat(left, TOPICS, 2)
    regex_key = encode_key(ConsumerKey(REGULAR_EXPRESSION, "g", regex="a"))
    assert (regex_key, None) in [r for a in step.appends for r in a.records]
    again = regex_hb(c, "m1", 0, 3, "a", TOPICS, topics=("b",))
    assert again.effects == [ResolveRegexes("g", frozenset({"a"}))]
    assert isinstance(again.reply, ConsumerHeartbeatReply)
    assert parts(again.reply) == {T2: (0, 1)}


def test_a_resolution_for_a_regex_nobody_subscribes_to_any_more_is_dropped() -> None:
    c = coordinator()
    step = regex_hb(c, "m1", 0, 0, "a", TOPICS, topics=("b",))
    regex_hb(c, "m1", 1, 1, "", TOPICS, topics=("b",))  # "" drops the regex
    epoch = c.consumer_group_describe(["g"])[0].group_epoch
    resolve(c, step, TOPICS, 2)
    assert c.consumer_group_describe(["g"])[0].group_epoch == epoch


@pytest.mark.parametrize(
    "pattern",
    [
        "(?<=x)a.*",  # look-behind: Python's re takes it, RE2 (Kafka's RE2/J) does not
        "(a)\\1",  # a back-reference
        "a{2,1}",
        "(",
    ],
)
def test_a_regex_kafka_would_refuse_is_refused(pattern: str) -> None:
    c = coordinator()
    req = ConsumerHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=5_000, subscribed_topic_regex=pattern, owned=()
    )
    reply = c.consumer_heartbeat(req, TOPICS, 0).reply
    assert isinstance(reply, ConsumerHeartbeatReply)
    assert reply.error is E.invalid_regular_expression
    assert reply.error_message is not None and pattern in reply.error_message


def test_a_pathological_regex_matches_in_linear_time() -> None:
    """``(a+)+$`` against a long name of a's ending in b backtracks exponentially in
    Python's re (minutes at 40 characters); the coordinator matches on the event loop."""
    c = coordinator()
    name = "a" * 5_000 + "b"
    meta = {name: TopicInfo(T1, 1), "aaa": TopicInfo(T2, 1)}
    req = ConsumerHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=5_000, subscribed_topic_regex="(a+)+", owned=()
    )
    started = time.perf_counter()
    step = c.consumer_heartbeat(req, meta, 0)
    resolve(c, step, meta, 0)
    assert time.perf_counter() - started < 1.0
    reply = hb(c, "m1", 1, 1, meta=meta)
    assert (reply.error, parts(reply)) == (E.none, {T2: (0,)})


def test_offset_delete_follows_the_members_subscriptions_through_expiry() -> None:
    """GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to the topic; once the last
    member's session expires (no heartbeat, no leave), the offsets may be deleted."""
    c = coordinator()
    hb(c, "m1", 0, 0, topics=("a",))
    commit = OffsetCommitRequest("g", (("a", (CommitPartition(0, 5),)),), 1, "m1", api_version=9)
    c.offset_commit(commit, 1)

    def delete(now: int) -> ErrorCode:
        reply = c.offset_delete(OffsetDeleteRequest("g", (("a", (0,)),)), now).reply
        assert isinstance(reply, OffsetDeleteReply)
        return reply.topics[0][1][0][1]

    assert delete(2) is E.group_subscribed_to_topic
    c.tick(10_001)  # m1's session expired
    assert c.consumer_group_describe(["g"])[0].members == ()
    assert delete(10_002) is E.none
