"""Consumer-protocol groups survive a coordinator restart: their records (Kafka's key types
3..8 and 16) replay into the same epochs, members and assignments, also after compaction."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from oncelog.group import GroupConfig
from oncelog.group.consumer_records import (
    CURRENT_MEMBER,
    REGULAR_EXPRESSION,
    ConsumerKey,
    decode_key,
    encode_key,
    is_consumer_key,
)
from oncelog.group.consumer_state import TopicInfo
from oncelog.group.messages import ConsumerHeartbeatReply, ConsumerHeartbeatRequest
from oncelog.group.topic_regex import resolve_topic_regexes
from tests.unit.test_group_support import Harness

E = ErrorCode
T1 = uuid.UUID(int=7)
TOPICS = {"a": TopicInfo(T1, 4)}


def hb(h: Harness, member: str, epoch: int, **kw: object) -> ConsumerHeartbeatReply:
    req = ConsumerHeartbeatRequest(
        "g",
        member,
        epoch,
        rebalance_timeout_ms=5_000 if epoch == 0 else -1,
        subscribed_topic_names=("a",) if epoch == 0 else None,
        owned=() if epoch == 0 else kw.pop("owned", None),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    reply = h.run(h.coord.consumer_heartbeat(req, TOPICS, h.now))
    assert isinstance(reply, ConsumerHeartbeatReply)
    return reply


def consumer_keys(h: Harness) -> list[ConsumerKey]:
    return [decode_key(k) for _, k, _, _ in h.log if is_consumer_key(k)]


def test_keys_round_trip_with_kafka_record_types() -> None:
    k = ConsumerKey(CURRENT_MEMBER, "group", "member")
    raw = encode_key(k)
    assert raw[:2] == b"\x00\x08"  # Kafka's ConsumerGroupCurrentMemberAssignmentKey
    assert decode_key(raw) == k


def test_group_comes_back_with_epochs_and_assignments() -> None:
    h = Harness(GroupConfig(consumer_session_timeout_ms=10_000))
    hb(h, "m1", 0, instance_id="i1")
    hb(h, "m2", 0)
    hb(h, "m1", 1, owned=((T1, (0, 1)),))  # revoked 2, 3: m1 moves to epoch 2
    before = h.coord.consumer_group_describe(["g"])[0]
    assert {k.kind for k in consumer_keys(h)} == {3, 4, 5, 6, 7, 8}
    quiet = len(h.log)
    hb(h, "m1", 2)  # nothing changed: nothing written
    assert len(h.log) == quiet
    h.reload()
    assert h.coord.consumer_group_describe(["g"])[0] == before
    # m2 picks up its partitions at the epoch it had: no new rebalance after the restart.
    r2 = hb(h, "m2", 2)
    assert (r2.error, r2.member_epoch, dict(r2.assignment or ())) == (E.none, 2, {T1: (2, 3)})
    assert h.coord.consumer_group_describe(["g"])[0].group_epoch == 2


def test_compacted_log_replays_to_the_same_group() -> None:
    h = Harness()
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    hb(h, "m1", 1, owned=((T1, (0, 1)),))
    hb(h, "m2", -1)
    before = h.coord.consumer_group_describe(["g"])[0]
    latest: dict[bytes, tuple[int, bytes, bytes | None, int]] = {}
    for entry in h.log:
        latest.pop(entry[1], None)
        latest[entry[1]] = entry
    h.log = [e for e in latest.values() if e[2] is not None]  # compaction drops tombstones
    h.reload()
    assert h.coord.consumer_group_describe(["g"])[0] == before


def test_a_deleted_group_leaves_only_tombstones() -> None:
    h = Harness()
    hb(h, "m1", 0)
    hb(h, "m1", -1)
    assert h.run(h.coord.delete_groups(["g"], h.now)).results == (("g", E.none),)
    live: dict[bytes, bytes | None] = {}
    for _, key, value, _ in h.log:
        live[key] = value
    assert [k for k, v in live.items() if v is not None and is_consumer_key(k)] == []
    h.reload()
    assert h.coord.consumer_group_describe(["g"])[0].error is E.group_id_not_found


def test_a_resolved_regex_is_a_record_of_type_16_and_survives_a_restart() -> None:
    """Kafka's ConsumerGroupRegularExpression record: after a reload the regex's matches
    still count, so the group's assignment does not lose them until a new resolution."""
    h = Harness(GroupConfig(consumer_session_timeout_ms=10_000))
    req = ConsumerHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=5_000, subscribed_topic_regex="a|x", owned=()
    )
    step = h.coord.consumer_heartbeat(req, TOPICS, h.now)
    h.run(step)
    assert [e.regexes for e in step.effects] == [frozenset({"a|x"})]
    h.run(h.coord.regexes_resolved("g", resolve_topic_regexes(["a|x"], TOPICS), TOPICS, h.now))
    r = hb(h, "m1", 1)
    assert (r.member_epoch, dict(r.assignment or ())) == (2, {T1: (0, 1, 2, 3)})
    key = ConsumerKey(REGULAR_EXPRESSION, "g", regex="a|x")
    assert key in consumer_keys(h)
    assert encode_key(key)[:2] == b"\x00\x10"
    before = h.coord.consumer_group_describe(["g"])[0]
    h.reload()
    assert h.coord.consumer_group_describe(["g"])[0] == before
    quiet = hb(h, "m1", 2)  # still assigned: no bump, whatever the next resolution says
    assert (quiet.error, quiet.member_epoch) == (E.none, 2)
    hb(h, "m1", -1)  # the last subscriber leaves: the resolution is tombstoned
    tombstones = [decode_key(k) for _, k, v, _ in h.log if is_consumer_key(k) and v is None]
    assert key in tombstones
