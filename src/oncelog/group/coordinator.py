"""Sans-IO classic group coordinator (Kafka's GroupCoordinator, classic protocol).

No sockets, awaits, file I/O or clock reads: time comes in as ``now_ms``, timers are
deadlines (``next_deadline()``) that the shell fires with ``tick(now_ms)``, and durable state
is records the shell appends to ``__consumer_offsets``. The protocol type is opaque
(consumer, connect, ...); only OffsetDelete and offset retention look inside "consumer"
subscriptions.

The step protocol
-----------------
Mutating calls (``join_group``, ``sync_group``, ``heartbeat``, ``leave_group``,
``offset_commit``, ``txn_offset_commit``, ``delete_groups``, ``offset_delete``, ``tick``)
return a ``Step``:

* ``step.reply``: the caller's reply, or ``Pending(token)`` when the request is parked (a
  JoinGroup until the join phase ends, a follower's SyncGroup until the leader's assignment);
  ``None`` for ``tick``.
* ``step.appends``: batches for ``__consumer_offsets``, in order. Each names its partition;
  ``producer_id`` != -1 marks a transactional batch (TxnOffsetCommit) of that producer/epoch.
* ``step.resolved``: ``(token, reply)`` for earlier ``Pending`` requests now answered
  (including other members' parked requests).

The shell is ``GroupService`` on the shared ``CoordinatorRuntime``. The coordinator applies a
step's state change at once. The shell must therefore:

1. serialize calls: make a call, append its ``appends`` (each batch atomically, durably, in
   order), and only then make the next call, reads included (they would otherwise see
   offsets that are not yet in the log);
2. send no reply of the step (``reply`` nor ``resolved``) before all its appends succeeded;
3. if an append fails, answer ``failed_replies(step, error)`` (NOT_COORDINATOR for a storage error),
   then ``abandon(error)`` the coordinator and build a new one from the log with ``load``:
   the in-memory state is ahead of the log, as after Kafka unloads a partition;
4. on ``Pending(token)``, keep the request until a ``resolved`` entry names the token (a
   reply for a token the shell no longer waits for, e.g. after a disconnect, is dropped);
5. call ``tick(now_ms)`` when ``next_deadline()`` is reached (or periodically), and handle
   its step the same way.

``complete_txn(producer_id, commit, partition)`` is called once the COMMIT/ABORT marker of
that producer is written to that ``__consumer_offsets`` partition. At start, replay every
partition with ``load`` (data batches) and ``load_marker`` (control batches) in log order,
then ``finish_load(now_ms)``; until then requests get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat
gets NONE, as in Kafka), or NOT_COORDINATOR once ``mark_failed()``. One coordinator holds the
groups of one ``__consumer_offsets`` partition (Kafka's shard); ``PartitionedGroups`` routes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kio.schema.errors import ErrorCode

from oncelog.group.config import GroupConfig
from oncelog.group.consumer_protocol import ConsumerProtocol, TopicMetadata
from oncelog.group.consumer_records import ConsumerGroupImage, is_consumer_key
from oncelog.group.consumer_state import ConsumerGroup, MemberState
from oncelog.group.core import Registry, partition_for
from oncelog.group.layout_migration import rewrite_legacy
from oncelog.group.membership import Membership
from oncelog.group.messages import (
    ConsumerHeartbeatReply,
    ConsumerHeartbeatRequest,
    DeleteGroupsReply,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedMember,
    GroupStep,
    HeartbeatReply,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupReply,
    LeaveGroupRequest,
    ListedGroup,
    ListGroupsReply,
    OffsetCommitRequest,
    OffsetDeleteReply,
    OffsetDeleteRequest,
    OffsetFetchReply,
    OffsetFetchRequest,
    Out,
    Pending,
    Reply,
    SyncGroupReply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.migration import Migration
from oncelog.group.offsets import Offsets, commit_errors
from oncelog.group.offsets_codec import (
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_offset_value_fast,
    decode_record,
    offset_key_fields,
)
from oncelog.group.state import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member

__all__ = ["GroupCoordinator", "partition_for"]

E = ErrorCode
_LOADING = E.coordinator_load_in_progress
# group.version 0, or "consumer" not in group.coordinator.rebalance.protocols: Kafka answers
# UNSUPPORTED_VERSION with no message.
_PROTOCOL_DISABLED = E.unsupported_version
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"  # ListGroups' group type (vs "classic"), not a protocol type


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        member_id_suffix: Callable[[], str] | None = None,
    ) -> None:
        """``member_id_suffix`` makes member ids (``client_id-suffix``); default a UUID4."""
        self.config = config or GroupConfig()
        self._reg = Registry(self.config, member_id_suffix)
        self._members = Membership(self._reg)
        self._offsets = Offsets(self._reg, self._members)
        self._consumer = ConsumerProtocol(self._reg)
        self._migration = Migration(self._reg, self._consumer, self._members)
        self._consumer.migration = self._migration
        self._consumer_image = ConsumerGroupImage()  # consumer-group records during load
        self._loaded = False
        # What a request gets until ``finish_load``: COORDINATOR_LOAD_IN_PROGRESS while the
        # partition loads, NOT_COORDINATOR once its load failed (``mark_failed``).
        self._unavailable = _LOADING
        self._next_cleanup_ms: int | None = None

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def failed(self) -> bool:
        """The load of this coordinator's partition failed: it answers NOT_COORDINATOR."""
        return self._unavailable is E.not_coordinator

    @property
    def unavailable(self) -> ErrorCode | None:
        """The error every request gets (None once loaded)."""
        return None if self._loaded else self._unavailable

    def mark_failed(self) -> None:
        """The load failed (Kafka's FAILED coordinator state): until it is replaced, every
        request gets NOT_COORDINATOR, and the client looks for its coordinator again."""
        if self._loaded:
            raise RuntimeError("mark_failed() after finish_load()")
        self._unavailable = E.not_coordinator

    def partition_for(self, group_id: str) -> int:
        return self._reg.partition(group_id)

    def group(self, group_id: str) -> Group | None:
        """The live state of a group, for inspection only."""
        return self._reg.groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._reg.groups.values())

    # -- membership requests --------------------------------------------------------------

    def join_group(
        self, req: JoinGroupRequest, now_ms: int, topics: TopicMetadata | None = None
    ) -> GroupStep:
        """``topics``: the broker's non-internal topics, needed when the group uses the
        consumer protocol (a classic member joining it; None: the topics it knows)."""
        if not self._loaded:
            return GroupStep(JoinGroupReply(self._unavailable, member_id=req.member_id))
        token, out = self._reg.new_token(), Out()
        self._advance(req.group_id, now_ms, out)
        group = self._reg.groups.get(req.group_id)
        if group is not None and group.consumer is not None:
            cg = group.consumer
            if cg.members:
                # A live consumer-protocol group: the classic member joins it (KIP-848's
                # migration path; Kafka routes here whatever the migration policy).
                joined = self._join_consumer_group(group, cg, req, topics, now_ms, out)
                return self._finish(req.group_id, now_ms, out, joined)
            self._reg.store_consumer_group(group, out, gone=True)
            group.consumer = None  # an empty consumer group turns classic
            group.protocol_type = None
            group.subscribed_topics = None
        reply = self._members.join(req, token, now_ms, out)
        return self._finish(req.group_id, now_ms, out, reply, token)

    def _join_consumer_group(
        self,
        group: Group,
        cg: ConsumerGroup,
        req: JoinGroupRequest,
        topics: TopicMetadata | None,
        now_ms: int,
        out: Out,
    ) -> JoinGroupReply:
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinGroupReply(E.invalid_session_timeout, member_id=req.member_id)
        known = cg.topics if topics is None else topics
        reply = self._migration.join(group, cg, req, known, now_ms, out)
        self._reg.store_consumer_group(group, out)
        return reply

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> GroupStep:
        if not self._loaded:
            return GroupStep(SyncGroupReply(self._unavailable))
        token, out = self._reg.new_token(), Out()
        self._advance(req.group_id, now_ms, out)
        group = self._reg.groups.get(req.group_id)
        if req.group_id and group is not None and group.consumer is not None:
            consumer_reply = self._migration.sync(group.consumer, req, now_ms)
            return self._finish(req.group_id, now_ms, out, consumer_reply)
        reply = self._members.sync(req, token, now_ms, out)
        return self._finish(req.group_id, now_ms, out, reply, token)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> GroupStep:
        if not self._loaded:
            # Kafka (GroupCoordinatorService.heartbeat): "the group is still loading, so
            # blindly respond" NONE; the member's session starts afresh once loaded.
            error = E.none if self._unavailable is _LOADING else self._unavailable
            return GroupStep(HeartbeatReply(error))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        group = self._reg.groups.get(req.group_id)
        if req.group_id and group is not None and group.consumer is not None:
            reply = self._migration.heartbeat(group.consumer, req, now_ms)
            return self._finish(req.group_id, now_ms, out, reply)
        return self._finish(req.group_id, now_ms, out, self._members.heartbeat(req, now_ms))

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> GroupStep:
        if not self._loaded:
            return GroupStep(LeaveGroupReply(self._unavailable))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        group = self._reg.groups.get(req.group_id)
        if req.group_id and group is not None and group.consumer is not None:
            reply = self._migration.leave(group, group.consumer, req, now_ms)
            self._reg.store_consumer_group(group, out)
            return self._finish(req.group_id, now_ms, out, reply)
        return self._finish(req.group_id, now_ms, out, self._members.leave(req, now_ms, out))

    # -- consumer group protocol (KIP-848) --------------------------------------------------

    def consumer_heartbeat(
        self, req: ConsumerHeartbeatRequest, topics: TopicMetadata, now_ms: int
    ) -> GroupStep:
        """ConsumerGroupHeartbeat. ``topics``: the broker's non-internal topics, read by
        the shell at the time of the call."""
        if not self.config.consumer_protocol_enabled:
            return GroupStep(ConsumerHeartbeatReply(_PROTOCOL_DISABLED))
        if not self._loaded:
            return GroupStep(ConsumerHeartbeatReply(self._unavailable, member_id=req.member_id))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        reply = self._consumer.heartbeat(req, topics, now_ms, out)
        group = self._reg.groups.get(req.group_id)
        if group is not None and group.consumer is not None:
            self._reg.store_consumer_group(group, out)
        return GroupStep(reply, out.appends(), out.resolved, out.effects)

    def regexes_resolved(
        self,
        group_id: str,
        resolved: Mapping[str, frozenset[str]],
        topics: TopicMetadata,
        now_ms: int,
    ) -> GroupStep:
        """The shell's answer to a ``ResolveRegexes`` effect: each regex's matches among
        ``topics`` (read when it resolved them). Records the resolutions and, if a match
        changed, bumps the group epoch (Kafka's handleRegularExpressionsResult)."""
        if not self._loaded:
            return GroupStep()  # reloading: the next heartbeat asks again
        out = Out()
        self._consumer.regexes_resolved(group_id, resolved, topics, now_ms)
        group = self._reg.groups.get(group_id)
        if group is not None and group.consumer is not None:
            self._reg.store_consumer_group(group, out)
        return GroupStep(None, out.appends(), out.resolved)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        if not self.config.consumer_protocol_enabled:
            return [DescribedConsumerGroup(_PROTOCOL_DISABLED, g) for g in group_ids]
        if not self._loaded:
            return [DescribedConsumerGroup(self._unavailable, g) for g in group_ids]
        return [self._consumer.describe(g) for g in group_ids]

    # -- offsets --------------------------------------------------------------------------

    def offset_commit(self, req: OffsetCommitRequest, now_ms: int) -> GroupStep:
        if not self._loaded:
            return GroupStep(commit_errors(req.topics, self._unavailable))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        return self._finish(req.group_id, now_ms, out, self._offsets.commit(req, now_ms, out))

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, now_ms: int) -> GroupStep:
        """The caller has checked producer id/epoch with the transaction coordinator."""
        if not self._loaded:
            return GroupStep(commit_errors(req.topics, self._unavailable))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        return self._finish(req.group_id, now_ms, out, self._offsets.txn_commit(req, now_ms, out))

    def complete_txn(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """The producer's COMMIT/ABORT marker is in ``__consumer_offsets``-``partition``
        (None: every partition). Commit makes its pending offsets visible, unless a later
        commit for the same partition exists; abort drops them."""
        self._reg.complete_txn(producer_id, commit, partition)

    def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        if not self._loaded:
            return OffsetFetchReply(req.group_id, self._unavailable)
        return self._offsets.fetch(req)

    def offset_delete(self, req: OffsetDeleteRequest, now_ms: int) -> GroupStep:
        if not self._loaded:
            return GroupStep(OffsetDeleteReply(self._unavailable))
        out = Out()
        self._advance(req.group_id, now_ms, out)
        return self._finish(req.group_id, now_ms, out, self._offsets.delete(req, out))

    # -- admin ----------------------------------------------------------------------------

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> ListGroupsReply:
        if not self._loaded:
            return ListGroupsReply(self._unavailable, ())
        types = {t.lower() for t in types_filter}
        states = {s.lower() for s in states_filter}
        listed = []
        for g in self._reg.groups.values():
            if g.consumer is not None:
                entry = ListedGroup(
                    g.group_id,
                    CONSUMER_PROTOCOL_TYPE,
                    g.consumer.state().value,
                    CONSUMER_GROUP_TYPE,
                )
            else:
                entry = ListedGroup(
                    g.group_id, g.protocol_type or "", g.state.value, CLASSIC_GROUP_TYPE
                )
            if types and entry.group_type not in types:
                continue
            if states and entry.state.lower() not in states:
                continue
            listed.append(entry)
        return ListGroupsReply(E.none, tuple(listed))

    def describe_groups(
        self, group_ids: Iterable[str], api_version: int = 5
    ) -> list[DescribedGroup]:
        """v6+ answers GROUP_ID_NOT_FOUND for an unknown group; older versions a Dead group.
        A consumer-protocol group is not a classic group, so it is not found here either
        (Kafka 4.x; clients describe it with ConsumerGroupDescribe and fall back to
        DescribeGroups on exactly this answer)."""
        result = []
        for gid in group_ids:
            group = self._reg.groups.get(gid)
            if not self._loaded:
                result.append(DescribedGroup(self._unavailable, gid, "", "", ""))
            elif group is None or group.consumer is not None:
                error = E.group_id_not_found if api_version >= 6 else E.none
                result.append(DescribedGroup(error, gid, GroupState.DEAD.value, "", ""))
            else:
                result.append(_describe(group))
        return result

    def delete_groups(self, group_ids: Iterable[str], now_ms: int) -> GroupStep:
        ids = list(dict.fromkeys(group_ids))
        if not self._loaded:
            return GroupStep(DeleteGroupsReply(tuple((g, self._unavailable) for g in ids)))
        out = Out()
        results = []
        for gid in ids:
            self._advance(gid, now_ms, out)
            group = self._reg.groups.get(gid)
            if group is None:
                error = E.group_id_not_found
            elif group.state is GroupState.EMPTY and not group.has_consumer_members():
                self._reg.delete_group(group, out)
                error = E.none
            else:
                error = E.non_empty_group
            results.append((gid, error))
        return GroupStep(DeleteGroupsReply(tuple(results)), out.appends(), out.resolved)

    # -- time -----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> GroupStep:
        """Fire due timers: join phases ending, session and sync expiries; and, every
        offsets.retention.check.interval.ms, offset retention."""
        out = Out()
        if not self._loaded:
            return GroupStep()
        for group in list(self._reg.groups.values()):
            self._members.advance(group, now_ms, out)
            self._expire_consumers(group, now_ms, out)
        if self._next_cleanup_ms is not None and now_ms >= self._next_cleanup_ms:
            self._offsets.expire(now_ms, out)
            self._next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms
        return GroupStep(None, out.appends(), out.resolved)

    def next_deadline(self) -> int | None:
        """The earliest time ``tick`` has something to do, or None."""
        times = [d for g in self._reg.groups.values() if (d := g.next_deadline()) is not None]
        times.extend(
            d
            for g in self._reg.groups.values()
            if g.consumer is not None and (d := g.consumer.next_deadline()) is not None
        )
        if self._next_cleanup_ms is not None:
            times.append(self._next_cleanup_ms)
        return min(times, default=None)

    def abandon(self, error: ErrorCode = E.not_coordinator) -> list[tuple[int, Reply]]:
        """Answer every parked request with ``error``; the coordinator must then be dropped."""
        out = Out()
        for group in self._reg.groups.values():
            self._members.abandon(group, error, out)
        self._loaded = False
        return list(out.resolved)

    # -- recovery -------------------------------------------------------------------------

    def load(self, records: Iterable[tuple[bytes, bytes | None]], producer_id: int = -1) -> None:
        """Replay one batch of ``__consumer_offsets`` (``producer_id`` of a transactional
        batch, else -1), in log order. Raises ``OffsetsCodecError`` on a corrupt record."""
        if self._loaded:
            raise RuntimeError("load() after finish_load()")
        groups = self._reg.groups
        for key, value in records:
            fields = offset_key_fields(key)
            if fields is not None:  # the common record: an offset commit, decoded fast
                group_id, topic, partition = fields
                if value is None:
                    if group_id not in groups:
                        continue
                    offset = None
                else:
                    offset = decode_offset_value_fast(value)
                group = groups.get(group_id)
                if group is None:
                    group = self._reg.get_or_create(group_id, None)
                self._reg.apply_offset(group, topic, partition, offset, producer_id)
                continue
            if is_consumer_key(key):  # KIP-848 record types 3-8 (legacy keys are 1-2)
                self._consumer_image.apply(key, value)
                continue
            k, v = decode_record(key, value)
            if isinstance(k, OffsetKey):
                if v is None and k.group_id not in groups:
                    continue
                assert v is None or isinstance(v, OffsetValue)
                group = self._reg.get_or_create(k.group_id, None)
                self._reg.apply_offset(group, k.topic, k.partition, v, producer_id)
            elif v is not None:
                assert isinstance(v, GroupValue)
                self._load_group(k.group_id, v)
            elif (gone := groups.get(k.group_id)) is not None:
                # Group deleted or expired; offsets have their own tombstones.
                if gone.has_offsets():
                    fresh = Group(k.group_id)
                    fresh.offsets = gone.offsets
                    fresh.pending_txn_offsets = gone.pending_txn_offsets
                    groups[k.group_id] = fresh
                else:
                    self._reg.forget(gone)

    def migrate_legacy(self, live_legacy_keys: Mapping[bytes, bool]) -> tuple[GroupStep, int]:
        """After ``finish_load``: the records that move legacy-layout keys to Kafka's layout
        (see layout_migration), and how many keys they rewrite."""
        out = Out()
        count = rewrite_legacy(self._reg, live_legacy_keys, out)
        return GroupStep(None, out.appends()), count

    def load_marker(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """Replay a COMMIT/ABORT control batch found in ``partition``."""
        self._reg.complete_txn(producer_id, commit, partition)

    def finish_load(self, now_ms: int) -> None:
        """End of replay. Groups come back Empty, or Stable with their last generation and
        members, who keep going if they heartbeat within their session timeout (as in Kafka).
        Consumer-protocol groups come back with their epochs and assignments."""
        for gid, (cg, written) in self._consumer_image.build().items():
            holder = self._reg.get_or_create(gid, now_ms)
            cg.written = written
            holder.consumer = cg
            holder.protocol_type = CONSUMER_PROTOCOL_TYPE
            for cm in cg.members.values():
                session = self.config.consumer_session_timeout_ms
                if cm.classic is not None:
                    session = cm.classic.session_timeout_ms
                cm.session_deadline_ms = now_ms + session
                if cm.classic is None and cm.state is MemberState.UNREVOKED_PARTITIONS:
                    cm.rebalance_deadline_ms = now_ms + cm.rebalance_timeout_ms
        self._consumer_image = ConsumerGroupImage()
        for group in list(self._reg.groups.values()):
            if group.consumer is not None:
                continue
            if not group.persisted and not group.has_offsets():
                self._reg.forget(group)  # only ever held offsets, all deleted since
                continue
            if group.state_timestamp_ms is None:
                group.state_timestamp_ms = now_ms
            if group.state is GroupState.STABLE:
                group.subscribed_topics = group.current_subscriptions()
                for m in group.members.values():
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        self._loaded = True
        self._next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms

    def _load_group(self, group_id: str, v: GroupValue) -> None:
        old = self._reg.groups.get(group_id)
        group = Group(
            group_id,
            state_timestamp_ms=v.state_timestamp_ms,
            generation_id=v.generation_id,
            protocol_type=v.protocol_type,
            persisted=True,
        )
        if old is not None:
            group.offsets, group.pending_txn_offsets = old.offsets, old.pending_txn_offsets
        if v.members and v.protocol_name is not None:
            group.protocol_name = v.protocol_name
            for mv in v.members:
                member = Member(
                    mv.member_id,
                    mv.group_instance_id,
                    mv.client_id,
                    mv.client_host,
                    mv.rebalance_timeout_ms,
                    mv.session_timeout_ms,
                    v.protocol_type or "",
                    [(v.protocol_name, mv.subscription)],
                    mv.assignment,
                )
                group.members[mv.member_id] = member
                if mv.group_instance_id is not None:
                    group.static_members[mv.group_instance_id] = mv.member_id
            group.leader_id = (
                v.leader_id if v.leader_id in group.members else next(iter(group.members))
            )
            group.state = GroupState.STABLE
        self._reg.groups[group_id] = group

    # -- internals ------------------------------------------------------------------------

    def _advance(self, group_id: str, now_ms: int, out: Out) -> None:
        group = self._reg.groups.get(group_id)
        if group is not None:
            self._members.advance(group, now_ms, out)
            self._expire_consumers(group, now_ms, out)

    def _expire_consumers(self, group: Group, now_ms: int, out: Out) -> None:
        if group.consumer is not None and self._consumer.expire(group, now_ms, out):
            self._reg.store_consumer_group(group, out)  # (nothing if it turned classic)

    def _finish(
        self, group_id: str, now_ms: int, out: Out, reply: Reply | None, token: int = 0
    ) -> GroupStep:
        self._advance(group_id, now_ms, out)  # timers due right now (e.g. a zero delay)
        resolved = out.resolved
        step_reply: Reply | Pending
        if reply is not None:
            step_reply = reply
        else:
            own = next((i for i, (t, _) in enumerate(resolved) if t == token), None)
            step_reply = Pending(token) if own is None else resolved.pop(own)[1]
        return GroupStep(step_reply, out.appends(), resolved)


def _describe(group: Group) -> DescribedGroup:
    stable = group.state is GroupState.STABLE and group.protocol_name is not None
    proto = group.protocol_name or ""
    members = tuple(
        DescribedMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(proto) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        E.none,
        group.group_id,
        group.state.value,
        group.protocol_type or "",
        proto if stable else "",
        members,
    )
