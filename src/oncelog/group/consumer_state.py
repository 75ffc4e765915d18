"""Consumer-protocol group state (KIP-848): epochs, members, target and current assignments.

The group epoch counts changes of membership, subscriptions or subscribed topic metadata;
the assignment epoch is the group epoch the target assignment was computed for. Each member
converges on its target through ``reconcile``: partitions it must give up are first revoked
(its epoch stays), and only then does it move to the target epoch, receiving the new
partitions that no other member still holds.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

TopicId = uuid.UUID
Partitions = dict[TopicId, frozenset[int]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: TopicId
    partitions: int


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """Kafka's ResolvedRegularExpression: the topics a subscribed regex matched when the
    shell last resolved it, the topic-names version it saw and when (``timestamp_ms``)."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ClassicMeta:
    """A member that speaks the classic protocol inside a consumer group (KIP-848 online
    migration): Kafka's ``ClassicMemberMetadata`` (session timeout, JoinGroup protocols)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription), preference order

    @property
    def protocol_name(self) -> str:
        """The name its JoinGroup and SyncGroup answers carry: its first choice."""
        return self.protocols[0][0]


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_deadline_ms: int | None = None
    rebalance_deadline_ms: int | None = None  # while partitions await revocation
    last_sent: Partitions | None = None  # the assignment in the last response
    classic: ClassicMeta | None = None  # set while it uses the classic protocol
    join_deadline_ms: int | None = None  # classic: asked to rejoin, must by then
    sync_deadline_ms: int | None = None  # classic: joined, must SyncGroup by then

    @property
    def left_temporarily(self) -> bool:
        """A static member that sent epoch -2: it keeps its place until its session ends."""
        return self.member_epoch == STATIC_LEAVE_EPOCH


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> target
    topics: dict[str, TopicInfo] = field(default_factory=dict)  # subscribed topics, as seen
    assignor: str = "uniform"
    written: dict[bytes, bytes] = field(default_factory=dict)  # records last persisted
    # Regex -> its matches (Kafka's ConsumerGroup.resolvedRegularExpressions): a member's
    # regex counts in the assignment only once resolved, which the shell does after the
    # heartbeat that brought it (``regex_refresh_scheduled`` meanwhile, not persisted).
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    regex_refresh_scheduled: bool = False

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_regexes(self) -> Counter[str]:
        """Regex -> how many members subscribe to it (Kafka's subscribedRegularExpressions)."""
        return Counter(
            m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex
        )

    def next_deadline(self) -> int | None:
        times = [
            t
            for m in self.members.values()
            for t in (
                m.session_deadline_ms,
                m.rebalance_deadline_ms,
                m.join_deadline_ms,
                m.sync_deadline_ms,
            )
            if t is not None
        ]
        return min(times, default=None)

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: type "consumer", and (unless the group is
        empty) a protocol every classic member supports."""
        if protocol_type != "consumer":
            return False
        classic = self.classic_members()
        if not self.members:
            return bool(names)
        return any(
            all(n in {p for p, _ in m.classic.protocols} for m in classic if m.classic)
            for n in names
        )

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Some partition of its target is still held by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        held = self.owner_elsewhere(member.member_id)
        for t, ps in self.target.get(member.member_id, {}).items():
            mine = member.assigned.get(t, frozenset())
            if any(p not in mine and (t, p) in held for p in ps):
                return True
        return False

    def owner_elsewhere(self, member_id: str) -> set[tuple[TopicId, int]]:
        """Partitions another member still holds (assigned or awaiting its revocation)."""
        held: set[tuple[TopicId, int]] = set()
        for m in self.members.values():
            if m.member_id == member_id:
                continue
            for parts in (m.assigned, m.pending_revocation):
                for t, ps in parts.items():
                    held.update((t, p) for p in ps)
        return held


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None) -> None:
    """Move ``member`` one step towards its target (Kafka's current assignment builder).

    ``owned``: the partitions the member reports owning in this heartbeat (None: unchanged).
    """
    target = group.target.get(member.member_id, {})
    epoch = group.assignment_epoch
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, member.pending_revocation):
            return  # still revoking
        member.pending_revocation = {}
        member.state = MemberState.STABLE
    if member.member_epoch == epoch and member.state is MemberState.STABLE:
        return
    if member.member_epoch != epoch:
        keep = _intersect(member.assigned, target)
        revoke = _minus(member.assigned, target)
        if revoke and (owned is None or _overlaps(owned, revoke)):
            member.assigned = keep
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        # (A member that already reports none of them has nothing left to revoke.)
    # Nothing to revoke: take the target epoch and the partitions others have released.
    held = group.owner_elsewhere(member.member_id)
    assigned: dict[TopicId, set[int]] = {}
    withheld = False
    for t, ps in target.items():
        for p in ps:
            if (t, p) in held:
                withheld = True
            else:
                assigned.setdefault(t, set()).add(p)
    if member.member_epoch != epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch
    member.assigned = {t: frozenset(ps) for t, ps in assigned.items()}
    member.state = MemberState.UNRELEASED_PARTITIONS if withheld else MemberState.STABLE


def _overlaps(a: Partitions, b: Partitions) -> bool:
    return any(a.get(t, frozenset()) & ps for t, ps in b.items())


def _intersect(a: Partitions, b: Partitions) -> Partitions:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _minus(a: Partitions, b: Partitions) -> Partitions:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}
