"""KIP-848 online migration between the classic and the consumer group protocols.

Follows Kafka 4.x's GroupMetadataManager (``group.consumer.migration.policy``):

* Upgrade (``convertToConsumerGroup``): the first ConsumerGroupHeartbeat (epoch 0) to a
  live classic group of protocol type "consumer" converts it, if the policy allows an
  upgrade and the group has at most ``group.consumer.max.size`` members (else
  GROUP_ID_NOT_FOUND, as before). The classic members stay, as classic-protocol members
  of the consumer group: epoch = the classic generation, their last assignment both
  current and target. Their parked JoinGroup/SyncGroup get REBALANCE_IN_PROGRESS; the
  classic group record gets a tombstone and the consumer group's records are written.
* Classic members inside a consumer group (``classicGroup*ToConsumerGroup``): JoinGroup
  is answered at once (generation = member epoch, no leader, so every member is a
  follower) after the server-side assignor and reconciliation ran with the member's
  subscription and owned partitions; SyncGroup returns its assigned partitions in the
  ConsumerProtocol assignment format of its own version; Heartbeat answers
  REBALANCE_IN_PROGRESS when its epoch is behind the group's, it must revoke, or the
  partitions it waited for are free; LeaveGroup removes it (no downgrade). Kafka routes
  every JoinGroup to a non-empty consumer group here whatever the policy.
* Downgrade (``convertToClassicGroup``): when a consumer-protocol member leaves or is
  fenced and only classic members would remain (at least one, at most
  ``group.max.size``), if the policy allows a downgrade, the group becomes a Stable
  classic group (generation = group epoch, each member's target assignment as its
  assignment), its consumer records get tombstones, the classic group record is written
  and a rebalance starts so the members rejoin.

Everything here is pure: ``now`` is passed in, records and replies go to ``Out``.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from oncelog.group.consumer_embedded import (
    EmbeddedProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version,
)
from oncelog.group.consumer_protocol import ConsumerProtocol, TopicMetadata
from oncelog.group.consumer_state import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    reconcile,
)
from oncelog.group.core import Registry
from oncelog.group.membership import Membership, rebalance_timeout
from oncelog.group.messages import (
    HeartbeatReply,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupReply,
    LeaveGroupRequest,
    LeaveMemberResult,
    Out,
    SyncGroupReply,
    SyncGroupRequest,
)
from oncelog.group.offsets_codec import encode_group_key
from oncelog.group.state import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member

E = ErrorCode


class Migration:
    def __init__(
        self, registry: Registry, consumer: ConsumerProtocol, membership: Membership
    ) -> None:
        self.reg = registry
        self.cfg = registry.config
        self.consumer = consumer
        self.membership = membership

    # -- upgrade --------------------------------------------------------------------------

    def upgrade(self, holder: Group, topics: TopicMetadata, now: int, out: Out) -> ErrorCode:
        """Kafka's validateOnlineUpgrade + convertToConsumerGroup: NONE once converted,
        GROUP_ID_NOT_FOUND if not allowed. A group exactly at group.consumer.max.size gets
        GROUP_MAX_SIZE_REACHED unconverted (Kafka converts, then refuses the joining member
        and drops the conversion with the failed request's records)."""
        refused = E.group_id_not_found
        if not self.cfg.upgrade_enabled:
            return refused
        if holder.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return refused  # not the consumer embedded protocol (connect, ...)
        if len(holder.members) > self.cfg.consumer_max_size:
            return refused
        ids = {name: info.topic_id for name, info in topics.items()}
        cg = ConsumerGroup(holder.group_id)
        cg.group_epoch = cg.assignment_epoch = holder.generation_id
        try:
            for m in holder.members.values():
                metadata = (
                    m.metadata(holder.protocol_name)
                    if holder.protocol_name is not None
                    else m.protocols[0][1]
                )
                sub = decode_subscription(metadata)
                assigned = _by_id(decode_assignment(m.assignment), ids)
                member = ConsumerMember(
                    m.member_id,
                    instance_id=m.group_instance_id,
                    rack_id=sub.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(set(sub.topics))),
                    member_epoch=holder.generation_id,
                    previous_member_epoch=holder.generation_id,
                    assigned=assigned,
                    classic=ClassicMeta(m.session_timeout_ms, tuple(m.protocols)),
                    session_deadline_ms=now + m.session_timeout_ms,
                )
                cg.members[member.member_id] = member
                cg.target[member.member_id] = dict(assigned)
                if member.instance_id is not None:
                    cg.static_members[member.instance_id] = member.member_id
        except (EmbeddedProtocolError, KeyError, IndexError):
            return refused  # a malformed embedded protocol
        if len(holder.members) >= self.cfg.consumer_max_size:
            return E.group_max_size_reached
        # Whoever waits in a join or sync phase rejoins into the consumer group.
        for m in holder.members.values():
            if m.join_token is not None:
                out.resolve(
                    m.join_token, JoinGroupReply(E.rebalance_in_progress, member_id=m.member_id)
                )
                m.join_token = None
            if m.sync_token is not None:
                out.resolve(m.sync_token, SyncGroupReply(E.rebalance_in_progress))
                m.sync_token = None
        gid = holder.group_id
        out.record(self.reg.partition(gid), encode_group_key(gid), None)
        _clear_classic(holder)
        holder.consumer = cg
        holder.protocol_type = CONSUMER_PROTOCOL_TYPE
        return E.none

    # -- downgrade ------------------------------------------------------------------------

    def downgrade(
        self, holder: Group, cg: ConsumerGroup, leaving: ConsumerMember, now: int, out: Out
    ) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember + convertToClassicGroup."""
        rest = [m for m in cg.members.values() if m.member_id != leaving.member_id]
        if leaving.classic is not None or not rest or any(m.classic is None for m in rest):
            return False
        if not self.cfg.downgrade_enabled or len(rest) > self.cfg.classic_max_size:
            return False
        self._to_classic(holder, cg, rest, now, out)
        self.membership.rebalance(holder, now, out)  # the leaver's partitions move
        return True

    def _to_classic(
        self, holder: Group, cg: ConsumerGroup, rest: list[ConsumerMember], now: int, out: Out
    ) -> None:
        """Kafka's convertToClassicGroup: a Stable classic group of ``rest`` (generation =
        the group epoch, each member's target assignment as its assignment); the consumer
        records get tombstones and the classic group record is written."""
        names = {info.topic_id: name for name, info in cg.topics.items()}
        self.reg.store_consumer_group(holder, out, gone=True)
        holder.consumer = None
        _clear_classic(holder)
        holder.generation_id = cg.group_epoch
        holder.protocol_type = CONSUMER_PROTOCOL_TYPE
        for m in rest:
            assert m.classic is not None
            member = Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                list(m.classic.protocols),
            )
            holder.add(member, None)
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
        holder.protocol_name = holder.select_protocol()
        holder.subscribed_topics = holder.current_subscriptions()
        for m in rest:
            member = holder.members[m.member_id]
            target = cg.target.get(m.member_id, {})
            member.assignment = encode_assignment(
                _by_name(target, names), version(member.metadata(holder.protocol_name))
            )
        holder.state = GroupState.STABLE
        holder.state_timestamp_ms = now
        self.reg.store_group(holder, out)

    # -- classic requests to a consumer group ---------------------------------------------

    def join(
        self,
        holder: Group,
        cg: ConsumerGroup,
        req: JoinGroupRequest,
        topics: TopicMetadata,
        now: int,
        out: Out,
    ) -> JoinGroupReply:
        """Kafka's classicGroupJoinToConsumerGroup (the caller checked the group id and
        the session timeout)."""
        unknown = req.member_id == ""
        member_id = self.reg.new_member_id(req.client_id) if unknown else req.member_id
        if len(cg.members) >= self.cfg.consumer_max_size and member_id not in cg.members:
            return JoinGroupReply(E.group_max_size_reached, member_id=req.member_id)
        names = {n for n, _ in req.protocols}
        if not cg.supports_classic_protocols(req.protocol_type, names):
            return JoinGroupReply(E.inconsistent_group_protocol, member_id=req.member_id)
        iid = req.group_instance_id
        if unknown and iid is None and req.api_version >= 4:
            return JoinGroupReply(E.member_id_required, member_id=member_id)
        try:
            sub = decode_subscription(req.protocols[0][1])
        except EmbeddedProtocolError:
            return JoinGroupReply(E.unknown_server_error, member_id=req.member_id)
        replaced = cg.members.get(cg.static_members.get(iid or "", ""))
        # The static member it replaces used the consumer protocol, and everyone else the
        # classic one: the group may turn classic (validateOnlineDowngradeWithReplacedMemberId).
        downgrade = (
            unknown
            and replaced is not None
            and replaced.classic is None
            and all(m.classic is not None for m in cg.members.values() if m is not replaced)
            and self.cfg.downgrade_enabled
            and len(cg.members) <= self.cfg.classic_max_size
        )
        found = self._joining_member(cg, member_id, iid, unknown)
        if isinstance(found, ErrorCode):
            return JoinGroupReply(found, member_id=req.member_id)
        member, bumped = found
        names_now = tuple(sorted(set(sub.topics)))
        if names_now != member.subscribed_topic_names or member.subscribed_topic_regex:
            member.subscribed_topic_names = names_now
            member.subscribed_topic_regex = None
            bumped = True
        if sub.rack_id is not None:
            member.rack_id = sub.rack_id
        member.rebalance_timeout_ms = rebalance_timeout(req)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = ClassicMeta(req.session_timeout_ms, tuple(req.protocols))
        if self.consumer.refresh_topics(cg, topics):
            bumped = True
        if bumped:
            cg.group_epoch += 1
        if cg.group_epoch > cg.assignment_epoch:
            self.consumer.assign(cg)
        ids = {name: info.topic_id for name, info in topics.items()}
        reconcile(cg, member, _by_id(sub.owned, ids))
        member.rebalance_deadline_ms = None  # classic members have join and sync timers
        member.join_deadline_ms = None
        member.session_deadline_ms = now + req.session_timeout_ms
        member.sync_deadline_ms = now + member.rebalance_timeout_ms
        if downgrade:
            # It takes the replaced member's place in a classic group; no rebalance.
            self._to_classic(holder, cg, list(cg.members.values()), now, out)
        return JoinGroupReply(
            E.none,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=member.classic.protocol_name,
            leader="",
            member_id=member.member_id,
        )

    def _joining_member(
        self, cg: ConsumerGroup, member_id: str, iid: str | None, unknown: bool
    ) -> tuple[ConsumerMember, bool] | ErrorCode:
        """The member (created if new) and whether that is a membership change."""
        if iid is None:
            member = cg.members.get(member_id)
            if member is None:
                member = cg.members[member_id] = ConsumerMember(member_id)
                return member, True
            return member, False
        current_id = cg.static_members.get(iid)
        if not unknown:
            if current_id is None:
                return E.unknown_member_id
            if current_id != member_id:
                return E.fenced_instance_id
            return cg.members[current_id], False
        if current_id is None:
            member = cg.members[member_id] = ConsumerMember(member_id, instance_id=iid)
            cg.static_members[iid] = member_id
            return member, True
        # A static member back with a new id takes over the old one's place (epoch 0).
        old = cg.members.pop(current_id)
        target = cg.target.pop(current_id, {})
        old.member_id = member_id
        old.member_epoch = old.previous_member_epoch = 0
        old.last_sent = None
        cg.members[member_id] = old
        cg.target[member_id] = target
        cg.static_members[iid] = member_id
        return old, False

    def sync(self, cg: ConsumerGroup, req: SyncGroupRequest, now: int) -> SyncGroupReply:
        """Kafka's classicGroupSyncToConsumerGroup."""
        if not cg.members:
            return SyncGroupReply(E.unknown_member_id)
        found = self._classic_member(cg, req.member_id, req.group_instance_id)
        if isinstance(found, ErrorCode):
            return SyncGroupReply(found)
        member, classic = found
        if req.generation_id != member.member_epoch:
            return SyncGroupReply(E.illegal_generation)
        if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return SyncGroupReply(E.inconsistent_group_protocol)
        if req.protocol_name is not None and req.protocol_name != classic.protocol_name:
            return SyncGroupReply(E.inconsistent_group_protocol)
        if (
            cg.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._ask_rejoin(member, now)
            return SyncGroupReply(E.rebalance_in_progress)
        member.sync_deadline_ms = None
        member.session_deadline_ms = now + classic.session_timeout_ms
        names = {info.topic_id: name for name, info in cg.topics.items()}
        assignment = encode_assignment(
            _by_name(member.assigned, names), version(classic.protocols[0][1])
        )
        return SyncGroupReply(
            E.none,
            req.protocol_type or CONSUMER_PROTOCOL_TYPE,
            req.protocol_name or classic.protocol_name,
            assignment,
        )

    def heartbeat(self, cg: ConsumerGroup, req: HeartbeatRequest, now: int) -> HeartbeatReply:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        found = self._classic_member(cg, req.member_id, req.group_instance_id)
        if isinstance(found, ErrorCode):
            return HeartbeatReply(found)
        member, classic = found
        if req.generation_id != member.member_epoch:
            return HeartbeatReply(E.illegal_generation)
        member.session_deadline_ms = now + classic.session_timeout_ms
        if (
            member.member_epoch < cg.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not cg.waiting_on_unreleased(member)
            )
        ):
            self._ask_rejoin(member, now)
            return HeartbeatReply(E.rebalance_in_progress)
        return HeartbeatReply(E.none)

    def leave(
        self, holder: Group, cg: ConsumerGroup, req: LeaveGroupRequest, now: int
    ) -> LeaveGroupReply:
        """Kafka's classicGroupLeaveToConsumerGroup: one group epoch bump for all leavers."""
        results = []
        removed = False
        for lm in req.members:
            iid = lm.group_instance_id
            member: ConsumerMember | None
            if iid is None:
                member = cg.members.get(lm.member_id)
                error = E.unknown_member_id if member is None else E.none
            else:
                current = cg.static_members.get(iid)
                member = None if current is None else cg.members[current]
                if member is None:
                    error = E.unknown_member_id
                elif lm.member_id and lm.member_id != member.member_id:
                    error = E.fenced_instance_id
                else:
                    error = E.none
            if member is not None and error is E.none and member.classic is None:
                error = E.unknown_member_id  # it does not use the classic protocol
            if member is None or error is not E.none:
                results.append(LeaveMemberResult(lm.member_id, iid, error))
                continue
            ConsumerProtocol.drop(cg, member)
            removed = True
            results.append(LeaveMemberResult(member.member_id, iid, E.none))
        if removed:
            cg.group_epoch += 1
            if cg.members:
                self.consumer.assign(cg)
            else:
                cg.target = {}
                cg.assignment_epoch = cg.group_epoch
                holder.state_timestamp_ms = now
        return LeaveGroupReply(E.none, tuple(results))

    def _classic_member(
        self, cg: ConsumerGroup, member_id: str, iid: str | None
    ) -> tuple[ConsumerMember, ClassicMeta] | ErrorCode:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if iid is None:
            member = cg.members.get(member_id)
        else:
            current = cg.static_members.get(iid)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                return E.fenced_instance_id
            member = cg.members.get(current)
        if member is None or member.classic is None:
            return E.unknown_member_id
        return member, member.classic

    @staticmethod
    def _ask_rejoin(member: ConsumerMember, now: int) -> None:
        if member.join_deadline_ms is None:  # scheduleConsumerGroupJoinTimeoutIfAbsent
            member.join_deadline_ms = now + member.rebalance_timeout_ms


def _clear_classic(holder: Group) -> None:
    """Empty the classic half of the holder (its members move to the other protocol)."""
    holder.members = {}
    holder.static_members = {}
    holder.pending_members = {}
    holder.pending_sync = set()
    holder.leader_id = None
    holder.protocol_name = None
    holder.subscribed_topics = None
    holder.join_deadline_ms = None
    holder.sync_deadline_ms = None
    holder.initial_delay = False
    holder.new_member_added = False
    holder.state = GroupState.EMPTY
    holder.persisted = False


def _by_id(parts: dict[str, frozenset[int]], ids: dict[str, uuid.UUID]) -> Partitions:
    """Partitions by topic name to partitions by topic id (unknown topics dropped)."""
    return {ids[t]: ps for t, ps in parts.items() if t in ids and ps}


def _by_name(parts: Partitions, names: dict[uuid.UUID, str]) -> dict[str, frozenset[int]]:
    return {names[t]: ps for t, ps in parts.items() if t in names and ps}
