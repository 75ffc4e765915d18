"""Classic-protocol group state: what the coordinator keeps per group and member.

Plain mutable data plus the small invariant-keeping operations Kafka's GroupMetadata has
(add/remove/replace a member, protocol voting). Rebalance logic lives in ``membership``.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from oncelog.group.consumer_state import ConsumerGroup
from oncelog.group.messages import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None
    seq: int  # append order in the offsets log: of two commits for a partition, the later wins


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), the member's preference order
    assignment: bytes = b""
    join_token: int | None = None  # set while its JoinGroup is parked
    sync_token: int | None = None  # set while its SyncGroup is parked
    is_new: bool = False  # joined but never got a JoinGroup response
    heartbeat_deadline_ms: int | None = None  # None while exempt (parked) or not yet loaded

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...] | list[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True, eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int | None = None  # when the current state began (offset retention)
    generation_id: int = 0
    protocol_type: str | None = None  # None: a "simple" group that only stores offsets
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED -> deadline
    pending_sync: set[str] = field(default_factory=set)  # joined this generation, not yet synced
    # classic groups; a consumer-protocol group derives it (``is_subscribed``)
    subscribed_topics: frozenset[str] | None = None  # None: unknown (not a parsable consumer group)
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict
    )
    # Join phase timer. In the initial-delay mode (the phase began in Empty) the phase only
    # ends when the timer fires; a member added meanwhile extends it, up to the rebalance timeout.
    join_deadline_ms: int | None = None
    initial_delay: bool = False
    initial_delay_ms: int = 0
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline_ms: int | None = None  # members who joined but never synced are removed then
    persisted: bool = False  # a group metadata record was written or loaded
    # Set while the group uses the consumer protocol (KIP-848); the classic fields above
    # then stay Empty and only the offsets are shared.
    consumer: ConsumerGroup | None = None

    # -- state ----------------------------------------------------------------------------

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state} -> {target}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def has_consumer_members(self) -> bool:
        return self.consumer is not None and bool(self.consumer.members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    # -- membership -----------------------------------------------------------------------

    def add(self, member: Member, join_token: int | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        member.join_token = join_token

    def remove(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member a new member id, keeping its position and assignment.
        The caller must first answer the old id's parked requests."""
        member = self.members[old_id]
        member.member_id = new_id
        self.members = {(new_id if k == old_id else k): m for k, m in self.members.items()}
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    # -- protocols ------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        counts = self._support_counts()
        return any(counts.get(n, 0) == len(self.members) for n in names)

    def _support_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update({name for name, _ in m.protocols})
        return counts

    def select_protocol(self) -> str:
        """The protocol all members support that gets the most first-choice votes (Kafka's
        rule); ties go to the protocol voted for first in join order."""
        if not self.members:
            raise RuntimeError(f"group {self.group_id}: no members to select a protocol")
        counts = self._support_counts()
        candidates = {n for n, c in counts.items() if c == len(self.members)}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda n: votes[n])  # Counter keeps first-vote order on ties

    def current_subscriptions(self) -> frozenset[str] | None:
        """Topics the members subscribe to, if this is a consumer group whose metadata parses."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.members:
            return None
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(consumer_subscription_topics(m.metadata(self.protocol_name)))
        except (ValueError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed(self, topic: str) -> bool:
        if self.consumer is not None:  # derived: members come and go (joins, leaves, expiry)
            return bool(self.consumer.members) and topic in self.consumer.topics
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # -- offsets --------------------------------------------------------------------------

    def has_pending_txn(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def has_offsets(self) -> bool:
        return bool(self.offsets) or any(self.pending_txn_offsets.values())

    # -- timers ---------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        times = [t for t in (self.join_deadline_ms, self.sync_deadline_ms) if t is not None]
        times.extend(self.pending_members.values())
        times.extend(
            m.heartbeat_deadline_ms
            for m in self.members.values()
            if m.heartbeat_deadline_ms is not None
        )
        return min(times, default=None)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a consumer-protocol Subscription. Every version starts like v0 (``i16
    version | [string topics]``), so only that prefix is read, as Kafka does."""
    buf = memoryview(metadata)
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version < 0:
            raise ValueError(f"negative subscription version {version}")
        (count,) = _I32.unpack_from(buf, 2)
        if count < 0:
            raise ValueError("null topic array")
        pos = 6
        topics = []
        for _ in range(count):
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n < 0 or pos + n > len(buf):
                raise ValueError("truncated topic name")
            topics.append(str(buf[pos : pos + n], "utf-8"))
            pos += n
        return topics
    except struct.error as exc:
        raise ValueError(f"truncated subscription: {exc}") from exc
