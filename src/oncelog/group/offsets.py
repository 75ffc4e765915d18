"""Committed offsets: OffsetCommit, TxnOffsetCommit (KIP-98/KIP-447), OffsetFetch,
OffsetDelete and retention, with Kafka's validation and error codes."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from oncelog.group.consumer_state import ConsumerGroup
from oncelog.group.core import Registry
from oncelog.group.membership import Membership
from oncelog.group.messages import (
    CommitPartition,
    CommitReply,
    FetchedPartition,
    OffsetCommitRequest,
    OffsetDeleteReply,
    OffsetDeleteRequest,
    OffsetFetchReply,
    OffsetFetchRequest,
    Out,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from oncelog.group.offsets_codec import OffsetValue
from oncelog.group.state import CONSUMER_PROTOCOL_TYPE, CommittedOffset, Group, GroupState

E = ErrorCode
S = GroupState
Topics = tuple[tuple[str, tuple[CommitPartition, ...]], ...]
_Base = Callable[[CommittedOffset], int]


class Offsets:
    def __init__(self, registry: Registry, membership: Membership) -> None:
        self.reg = registry
        self.cfg = registry.config
        self.membership = membership

    # -- commits --------------------------------------------------------------------------

    def commit(self, req: OffsetCommitRequest, now: int, out: Out) -> CommitReply:
        group = self.reg.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                # A member of a group this coordinator does not know (expired or deleted).
                return commit_errors(
                    req.topics,
                    E.group_id_not_found if req.api_version >= 9 else E.illegal_generation,
                )
            # Offsets-only use of Kafka: a "simple" group is created implicitly.
            group = self.reg.get_or_create(req.group_id, now)
        error = _validate(
            group, req.generation_id, req.member_id, req.group_instance_id, False, req.api_version
        )
        if error is not None:
            return commit_errors(req.topics, error)
        self.membership.touch(group, req.member_id, now)
        expire = None if req.retention_time_ms == -1 else now + req.retention_time_ms
        return self._store(group, req.topics, now, expire, out, -1, -1)

    def txn_commit(self, req: TxnOffsetCommitRequest, now: int, out: Out) -> CommitReply:
        """Offsets become pending for the producer; ``Registry.complete_txn`` settles them."""
        group = self.reg.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                return commit_errors(req.topics, E.illegal_generation)
            group = self.reg.get_or_create(req.group_id, now)
        # KIP-447: a zombie of an older generation is fenced like a plain commit would be.
        error = _validate(group, req.generation_id, req.member_id, req.group_instance_id, True)
        if error is not None:
            return commit_errors(req.topics, error)
        return self._store(group, req.topics, now, None, out, req.producer_id, req.producer_epoch)

    def _store(
        self,
        group: Group,
        topics: Topics,
        now: int,
        expire: int | None,
        out: Out,
        producer_id: int,
        producer_epoch: int,
    ) -> CommitReply:
        result = []
        for topic, parts in topics:
            errors = []
            for p in parts:
                metadata = "" if p.metadata is None else p.metadata
                if _java_length(metadata) > self.cfg.offset_metadata_max_bytes:
                    errors.append((p.partition, E.offset_metadata_too_large))
                    continue
                value = OffsetValue(p.offset, p.leader_epoch, metadata, now, expire)
                self.reg.write_offset(
                    group, topic, p.partition, value, out, producer_id, producer_epoch
                )
                errors.append((p.partition, E.none))
            result.append((topic, tuple(errors)))
        return CommitReply(tuple(result))

    # -- OffsetFetch ----------------------------------------------------------------------

    def fetch(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        group = self.reg.groups.get(req.group_id)
        if group is None:
            # Kafka: an unknown group simply has no offsets.
            topics = tuple(
                (t, tuple(FetchedPartition(p, -1, -1, "") for p in parts))
                for t, parts in (req.topics or ())
            )
            return OffsetFetchReply(req.group_id, E.none, topics)
        if group.consumer is not None and (req.member_id or req.member_epoch >= 0):
            # A member reads with its current epoch (KIP-848), so a zombie cannot resume
            # from offsets that belong to the partitions' new owner.
            member = group.consumer.members.get(req.member_id or "")
            if member is None:
                return OffsetFetchReply(req.group_id, E.unknown_member_id)
            if member.member_epoch != req.member_epoch:
                return OffsetFetchReply(req.group_id, _epoch_error(member.classic is not None))
        if req.topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(group.offsets):
                by_topic.setdefault(topic, []).append(partition)
            requested = tuple((t, tuple(ps)) for t, ps in by_topic.items())
        else:
            requested = req.topics
        return OffsetFetchReply(
            req.group_id,
            E.none,
            tuple(
                (t, tuple(self._fetch_one(group, (t, p), req.require_stable) for p in parts))
                for t, parts in requested
            ),
        )

    @staticmethod
    def _fetch_one(group: Group, tp: TopicPartition, require_stable: bool) -> FetchedPartition:
        if require_stable and group.has_pending_txn(tp):
            # KIP-447: the consumer must wait until the transaction ends, or it could
            # reprocess what the transaction's commit would mark as consumed.
            return FetchedPartition(tp[1], -1, -1, "", E.unstable_offset_commit)
        o = group.offsets.get(tp)
        if o is None:
            return FetchedPartition(tp[1], -1, -1, "")
        return FetchedPartition(tp[1], o.offset, o.leader_epoch, o.metadata)

    # -- OffsetDelete ---------------------------------------------------------------------

    def delete(self, req: OffsetDeleteRequest, out: Out) -> OffsetDeleteReply:
        group = self.reg.groups.get(req.group_id)
        if group is None:
            return OffsetDeleteReply(E.group_id_not_found)
        if group.state is not S.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            # Only the consumer protocol tells which topics an active group consumes.
            return OffsetDeleteReply(E.non_empty_group)
        result = []
        for topic, parts in req.topics:
            if group.is_subscribed(topic):
                result.append((topic, tuple((p, E.group_subscribed_to_topic) for p in parts)))
                continue
            for p in parts:
                tp = (topic, p)
                if tp in group.offsets or group.has_pending_txn(tp):
                    self.reg.write_offset(group, topic, p, None, out)
            result.append((topic, tuple((p, E.none) for p in parts)))
        return OffsetDeleteReply(E.none, tuple(result))

    # -- retention ------------------------------------------------------------------------

    def expire(self, now: int, out: Out) -> None:
        """Tombstone expired offsets; forget Empty groups left with nothing (Kafka 2.1+)."""
        retention = self.cfg.offsets_retention_ms
        for group in list(self.reg.groups.values()):
            base = _expiry_base(group)
            if base is not None:
                for tp, o in sorted(group.offsets.items()):
                    if group.is_subscribed(tp[0]) or group.has_pending_txn(tp):
                        continue
                    if o.expire_timestamp_ms is not None:
                        expired = now >= o.expire_timestamp_ms
                    else:
                        expired = now - base(o) >= retention
                    if expired:
                        self.reg.write_offset(group, tp[0], tp[1], None, out)
            if (
                group.state is S.EMPTY
                and not group.has_offsets()
                and not group.pending_members
                and not group.has_consumer_members()
            ):
                self.reg.delete_group(group, out)


def _expiry_base(group: Group) -> _Base | None:
    """When an offset's retention clock started, or None if the group's offsets stay."""
    if group.protocol_type is None or group.has_consumer_members():
        return _commit_time  # a simple group, or a live consumer-protocol one
    if group.state is S.EMPTY:
        # From the moment the group became empty (KIP-211).
        since = group.state_timestamp_ms
        if since is None:
            return _commit_time
        return lambda _o: since
    if group.state is S.STABLE and group.subscribed_topics is not None:
        return _commit_time  # topics the group no longer consumes
    return None


def _commit_time(o: CommittedOffset) -> int:
    return o.commit_timestamp_ms


def _validate(
    group: Group,
    generation: int,
    member_id: str,
    instance_id: str | None,
    txn: bool,
    api_version: int = 9,
) -> ErrorCode | None:
    if group.consumer is not None:
        return _validate_member_epoch(group.consumer, generation, member_id, txn, api_version)
    if generation < 0 and group.state is S.EMPTY:
        return None  # admin tools and consumers without group management
    if generation >= 0 or member_id or instance_id is not None:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                return E.fenced_instance_id
        elif member_id not in group.members:
            return E.unknown_member_id
        if generation != group.generation_id:
            return E.illegal_generation
    elif not txn and group.state is not S.EMPTY:
        # No member id nor generation: only allowed once nobody consumes. Transactional
        # commits before KIP-447 (v0-v2) carry neither, so they are exempt.
        return E.unknown_member_id
    if not txn and group.state is S.COMPLETING_REBALANCE:
        # The member has the new generation but not its assignment yet.
        return E.rebalance_in_progress
    return None


def _validate_member_epoch(
    cg: ConsumerGroup, member_epoch: int, member_id: str, txn: bool, api_version: int
) -> ErrorCode | None:
    """A consumer-protocol group: the generation field carries the member epoch (KIP-848),
    which must be the member's current one; so a zombie's transactional commit made
    before it was fenced or reassigned fails (KIP-447). A classic member inside it (online
    migration) commits with its generation, which is its member epoch."""
    if member_epoch < 0 and not cg.members:
        return None  # admin tools and consumers without group management
    member = cg.members.get(member_id)
    if member is None:
        return E.unknown_member_id
    classic = member.classic is not None
    if not txn and not classic and api_version < 9:
        return E.unsupported_version  # the member epoch needs OffsetCommit v9+
    if member_epoch != member.member_epoch:
        return _epoch_error(classic)
    return None


def _epoch_error(classic: bool) -> ErrorCode:
    """Kafka's ConsumerGroup.validateMemberEpoch: a classic member has an illegal
    generation, a consumer-protocol one a stale member epoch."""
    return E.illegal_generation if classic else E.stale_member_epoch


def commit_errors(topics: Topics, error: ErrorCode) -> CommitReply:
    return CommitReply(
        tuple((t, tuple((p.partition, error) for p in parts)) for t, parts in topics)
    )


def _java_length(s: str) -> int:
    """``String.length()``: UTF-16 code units, which is what offset.metadata.max.bytes limits."""
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)
