"""Plain-data requests, replies and steps of the sans-IO group coordinator.

Requests are version-independent: the API layer fills them from any kio request version
(absent fields keep the defaults below, which are Kafka's) and passes ``api_version`` where
the semantics change between versions. Replies carry Kafka's values; the API layer drops
fields an older response version lacks. Topic lists keep the request's order.

See ``oncelog.group.coordinator`` for the step protocol and ``oncelog.coordinator.runtime``
for the shared ``Step``/``Append``/``Pending`` vocabulary.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.coordinator.runtime import Append, Pending, Step

TopicPartition = tuple[str, int]
NO_GENERATION = -1


# -- membership --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str  # "" for a member joining for the first time
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference order
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # v0 has none: -1 means the session timeout, as in Kafka
    group_instance_id: str | None = None  # static membership (v5+)
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9  # v4+: MEMBER_ID_REQUIRED round trip; v9+: skip_assignment
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupReply:
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None  # responses before v7 need "" for None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()  # only for the leader

    def with_error(self, error: ErrorCode) -> JoinGroupReply:
        return JoinGroupReply(error, member_id=self.member_id)


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+; None skips the check
    protocol_name: str | None = None  # v5+; None skips the check
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member_id, assignment), leader only


@dataclass(frozen=True, slots=True)
class SyncGroupReply:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""

    def with_error(self, error: ErrorCode) -> SyncGroupReply:
        return SyncGroupReply(error)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    error: ErrorCode

    def with_error(self, error: ErrorCode) -> HeartbeatReply:
        return HeartbeatReply(error)


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str  # "" to remove a static member by group_instance_id (admin path)
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeaveMember, ...]  # v0-v2: the single member_id of the request


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupReply:
    """v0-v2 responses carry one error: ``error`` if set, else ``members[0].error``."""

    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()

    def with_error(self, error: ErrorCode) -> LeaveGroupReply:
        return LeaveGroupReply(error)


# -- consumer group protocol (KIP-848) ----------------------------------------------------

TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    """ConsumerGroupHeartbeat; None fields did not change since the member's last one."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicIdPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1  # v1+: the client makes its member id
    # The group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (group
    # configs, passed in by the broker); None: the broker's group.consumer.* values.
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatReply:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicIdPartitions | None = None  # None: unchanged

    def with_error(self, error: ErrorCode) -> ConsumerHeartbeatReply:
        return ConsumerHeartbeatReply(error, member_id=self.member_id)


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    classic: bool = False  # a classic-protocol member (online migration)


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error: ErrorCode
    group_id: str
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    error_message: str | None = None


# -- offsets -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None  # None is stored as ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...]
    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4 only; -1 = broker retention
    api_version: int = 9  # v9+: GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[CommitPartition, ...]], ...]
    generation_id: int = NO_GENERATION  # v3+ (KIP-447)
    member_id: str = ""  # v3+
    group_instance_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class CommitReply:
    """OffsetCommit and TxnOffsetCommit: an error per requested partition."""

    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]

    def with_error(self, error: ErrorCode) -> CommitReply:
        return CommitReply(
            tuple((t, tuple((p, error) for p, _ in parts)) for t, parts in self.topics)
        )


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    """One group (OffsetFetch v8+ carries several: call ``offset_fetch`` per group)."""

    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None: every committed offset
    require_stable: bool = False  # v7+
    member_id: str | None = None  # v9+, consumer-protocol members
    member_epoch: int = -1  # v9+


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    offset: int  # -1: no committed offset
    leader_epoch: int  # -1: none
    metadata: str
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchReply:
    group_id: str
    error: ErrorCode
    topics: tuple[tuple[str, tuple[FetchedPartition, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteReply:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()

    def with_error(self, error: ErrorCode) -> OffsetDeleteReply:
        return OffsetDeleteReply(error)


# -- admin -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsReply:
    error: ErrorCode
    groups: tuple[ListedGroup, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # empty unless the group is Stable
    assignment: bytes  # empty unless the group is Stable


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str  # the selected protocol, only when Stable
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsReply:
    results: tuple[tuple[str, ErrorCode], ...]

    def with_error(self, error: ErrorCode) -> DeleteGroupsReply:
        return DeleteGroupsReply(tuple((g, error) for g, _ in self.results))


Reply = (
    JoinGroupReply
    | SyncGroupReply
    | HeartbeatReply
    | LeaveGroupReply
    | CommitReply
    | OffsetDeleteReply
    | DeleteGroupsReply
    | ConsumerHeartbeatReply
)


# -- steps -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolveRegexes:
    """Resolve ``regexes`` against the broker's topics, after the step's replies, and hand
    the result to the core (``GroupCoordinator.regexes_resolved``): Kafka resolves them in
    an offloaded task (GroupMetadataManager.maybeUpdateRegularExpressions)."""

    group_id: str
    regexes: frozenset[str]


GroupStep = Step[Reply, ResolveRegexes]


def failed_replies(step: GroupStep, error: ErrorCode) -> list[tuple[int | None, Reply]]:
    """Error versions of every reply of ``step`` (token None = ``step.reply``), for when
    its appends failed."""
    out: list[tuple[int | None, Reply]] = []
    if step.reply is not None and not isinstance(step.reply, Pending):
        out.append((None, step.reply.with_error(error)))
    out.extend((t, r.with_error(error)) for t, r in step.resolved)
    return out


class Out:
    """Collects a call's appends and resolved replies while handlers run."""

    __slots__ = ("_batches", "effects", "resolved")

    def __init__(self) -> None:
        # (partition, producer_id, producer_epoch, records)
        self._batches: list[tuple[int, int, int, list[tuple[bytes, bytes | None]]]] = []
        self.resolved: list[tuple[int, Reply]] = []
        self.effects: list[ResolveRegexes] = []

    def record(
        self,
        partition: int,
        key: bytes,
        value: bytes | None,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        # Consecutive records for the same partition and producer share one batch.
        if self._batches:
            p, pid, epoch, records = self._batches[-1]
            if (p, pid, epoch) == (partition, producer_id, producer_epoch):
                records.append((key, value))
                return
        self._batches.append((partition, producer_id, producer_epoch, [(key, value)]))

    def resolve(self, token: int, reply: JoinGroupReply | SyncGroupReply) -> None:
        self.resolved.append((token, reply))

    def appends(self) -> list[Append]:
        return [Append(p, tuple(recs), pid, epoch) for p, pid, epoch, recs in self._batches]
