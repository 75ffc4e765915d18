"""ConsumerGroupHeartbeat (KIP-848): the consumer group protocol's pure state machine.

Inputs are the heartbeat fields, the broker's topic metadata and ``now_ms``; outputs are the
reply (and, through the group, the state the shell's timers read). A heartbeat may bump the
group epoch (join, leave, new subscription, changed topic metadata); the target assignment
is then recomputed by the group's server-side assignor, and the member is reconciled one
step towards its target. Other members converge on their own next heartbeats.

Groups share one namespace with the classic protocol: the consumer state hangs off the
same ``Group`` (which keeps the offsets). An empty classic group becomes a consumer group
on the first consumer-protocol heartbeat. A non-empty one is converted by the online
migration (``migration``, when group.consumer.migration.policy allows an upgrade) or is
not a consumer group (GROUP_ID_NOT_FOUND), as in Kafka. A member fenced or leaving may
turn the group classic again (a downgrade), which ``migration`` decides too.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from oncelog.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignorInput
from oncelog.group.config import GroupConfig
from oncelog.group.consumer_state import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    ResolvedRegex,
    TopicInfo,
    reconcile,
)
from oncelog.group.core import Registry
from oncelog.group.messages import (
    ConsumerHeartbeatReply,
    ConsumerHeartbeatRequest,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
    Out,
    ResolveRegexes,
    TopicIdPartitions,
)
from oncelog.group.state import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from oncelog.group.topic_regex import InvalidTopicRegex, check_topic_regex

E = ErrorCode
TopicMetadata = Mapping[str, TopicInfo]


class MigrationHooks(Protocol):
    def upgrade(self, holder: Group, topics: TopicMetadata, now: int, out: Out) -> ErrorCode:
        """Convert the live classic group to a consumer group for a joining member: NONE,
        or why not (nothing changed then)."""
        ...

    def downgrade(
        self, holder: Group, cg: ConsumerGroup, leaving: ConsumerMember, now: int, out: Out
    ) -> bool:
        """Convert to a classic group without ``leaving``; False if not allowed."""
        ...


class ConsumerProtocol:
    def __init__(self, registry: Registry) -> None:
        self.reg = registry
        self.cfg: GroupConfig = registry.config
        self.migration: MigrationHooks | None = None
        self._seen_topic_names: frozenset[str] = frozenset()
        self._new_topics_version = 0

    # -- heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self, req: ConsumerHeartbeatRequest, topics: TopicMetadata, now: int, out: Out
    ) -> ConsumerHeartbeatReply:
        error = self._invalid(req)
        if error is not None:
            return ConsumerHeartbeatReply(E.invalid_request, error, member_id=req.member_id)
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            return ConsumerHeartbeatReply(
                E.unsupported_assignor,
                f"assignor {req.server_assignor} is not supported",
                member_id=req.member_id,
            )
        if req.subscribed_topic_regex:
            try:
                check_topic_regex(req.subscribed_topic_regex)
            except InvalidTopicRegex as exc:
                return ConsumerHeartbeatReply(
                    E.invalid_regular_expression, str(exc), member_id=req.member_id
                )
        found = self._group(req.group_id, req.member_epoch == 0, topics, now, out)
        if isinstance(found, ErrorCode):
            return ConsumerHeartbeatReply(found, member_id=req.member_id)
        holder, cg = found
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(holder, cg, req, now, out)
        if len(cg.members) >= self.cfg.consumer_max_size and req.member_id not in cg.members:
            return ConsumerHeartbeatReply(
                E.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{self.cfg.consumer_max_size} members.",
                member_id=req.member_id,
            )
        member_or_error = self._member(cg, req, now)
        if isinstance(member_or_error, ConsumerHeartbeatReply):
            return member_or_error
        member, _ = member_or_error
        old_regex = member.subscribed_topic_regex
        # Kafka's consumerGroupHeartbeat bumps for a new group, changed names (a new
        # member's names change from none) or a regex already resolved; a regex not yet
        # resolved waits for its resolution, which bumps the epoch then.
        bumped = cg.group_epoch == 0
        if self._update(cg, member, req):
            bumped = True
        if self._update_regexes(cg, member, old_regex, topics, now, out):
            bumped = True
        if self.refresh_topics(cg, topics):
            bumped = True
        if bumped:
            cg.group_epoch += 1
        if cg.group_epoch > cg.assignment_epoch:
            self.assign(cg)
        reconcile(cg, member, _partitions(req.owned))
        member.session_deadline_ms = now + _session_timeout_ms(self.cfg, req)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_deadline_ms is None:
                member.rebalance_deadline_ms = now + member.rebalance_timeout_ms
        else:
            member.rebalance_deadline_ms = None
        # Kafka's "full" heartbeat (after a reconnect, say) gets the assignment again.
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        assignment = None
        if full or member.last_sent != member.assigned:
            member.last_sent = dict(member.assigned)
            assignment = _wire(member.assigned)
        return ConsumerHeartbeatReply(
            E.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=req.heartbeat_interval_ms
            or self.cfg.consumer_heartbeat_interval_ms,
            assignment=assignment,
        )

    @staticmethod
    def _invalid(req: ConsumerHeartbeatRequest) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if req.rack_id is not None and not req.rack_id:
            return "RackId can't be empty."
        if req.api_version >= 1 and not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch > 0 or req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if not req.member_id:
                return "MemberId can't be empty."
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if req.owned is None or req.owned:
                return "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                return "InstanceId can't be null."
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            return f"MemberEpoch {req.member_epoch} is invalid."
        return None

    def _group(
        self, group_id: str, create: bool, topics: TopicMetadata, now: int, out: Out
    ) -> tuple[Group, ConsumerGroup] | ErrorCode:
        holder = self.reg.groups.get(group_id)
        if holder is None:
            if not create:
                return E.group_id_not_found
            holder = self.reg.get_or_create(group_id, now)
        if holder.consumer is None and (holder.members or holder.state is not GroupState.EMPTY):
            # A live classic group: only a joining member may trigger the online upgrade.
            if not create or self.migration is None:
                return E.group_id_not_found
            refused = self.migration.upgrade(holder, topics, now, out)
            if refused is not E.none:
                return refused
        if holder.consumer is None:
            if not create:
                return E.group_id_not_found
            # An empty classic group (or one holding only offsets) becomes a consumer group.
            holder.consumer = ConsumerGroup(group_id)
            holder.protocol_type = CONSUMER_PROTOCOL_TYPE
            holder.protocol_name = None
        return holder, holder.consumer

    def _member(
        self, cg: ConsumerGroup, req: ConsumerHeartbeatRequest, now: int
    ) -> tuple[ConsumerMember, bool] | ConsumerHeartbeatReply:
        """The member the heartbeat is from, and whether the group epoch must bump."""
        member_id = req.member_id or str(uuid.uuid4())
        if req.member_epoch == 0:
            if req.instance_id is not None:
                old_id = cg.static_members.get(req.instance_id)
                if old_id is not None:
                    old = cg.members[old_id]
                    # (A classic static member is replaced at once, as in Kafka.)
                    if not old.left_temporarily and old.classic is None:
                        return ConsumerHeartbeatReply(
                            E.unreleased_instance_id,
                            f"instance {req.instance_id} is in use by member {old_id}",
                            member_id=req.member_id,
                        )
                    return self._replace_static(cg, old, member_id, req), False
            existing = cg.members.get(member_id)
            if existing is not None:
                self.drop(cg, existing)  # a member rejoining from scratch
            member = ConsumerMember(member_id, instance_id=req.instance_id)
            cg.members[member_id] = member
            if req.instance_id is not None:
                cg.static_members[req.instance_id] = member_id
            return member, True
        known = cg.members.get(req.member_id)
        if known is None:
            return ConsumerHeartbeatReply(
                E.unknown_member_id,
                f"member {req.member_id} is not in group {cg.group_id}",
                member_id=req.member_id,
            )
        member = known
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return ConsumerHeartbeatReply(E.fenced_instance_id, member_id=req.member_id)
        if req.member_epoch != member.member_epoch:
            # A lost response: the member may still be at its previous epoch, as long as it
            # owns nothing it was not assigned.
            owned = _partitions(req.owned)
            retry = req.member_epoch == member.previous_member_epoch and (
                owned is None or _subset(owned, member.assigned)
            )
            if not retry:
                return ConsumerHeartbeatReply(
                    E.fenced_member_epoch,
                    f"member epoch {req.member_epoch} is not {member.member_epoch}",
                    member_id=req.member_id,
                )
        return member, False

    def _replace_static(
        self, cg: ConsumerGroup, old: ConsumerMember, new_id: str, req: ConsumerHeartbeatRequest
    ) -> ConsumerMember:
        """A static member back after leaving with -2: the new id takes over its place,
        epoch and assignment without a rebalance."""
        del cg.members[old.member_id]
        old_target = cg.target.pop(old.member_id, {})
        old.member_id = new_id
        if old.classic is not None:  # Kafka restarts a replaced classic member at epoch 0
            old.member_epoch = old.previous_member_epoch = 0
        else:
            old.member_epoch = old.previous_member_epoch
        old.last_sent = None
        cg.members[new_id] = old
        cg.target[new_id] = old_target
        assert old.instance_id is not None
        cg.static_members[old.instance_id] = new_id
        return old

    @staticmethod
    def _update(cg: ConsumerGroup, member: ConsumerMember, req: ConsumerHeartbeatRequest) -> bool:
        """Apply the heartbeat's changed fields; True if the names or assignor changed (a
        changed regex is ``_update_regexes``'s to judge)."""
        changed = False
        member.classic = None  # it speaks the consumer protocol now
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.client_id:
            member.client_id, member.client_host = req.client_id, req.client_host
        # Names and regex are updated independently, as Kafka does: the member subscribes
        # to both. librdkafka sends a regex with an empty list of names, and "" (no regex)
        # with names.
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                changed = True
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor or None
            changed = True
        return changed

    def _update_regexes(
        self,
        cg: ConsumerGroup,
        member: ConsumerMember,
        old_regex: str | None,
        topics: TopicMetadata,
        now: int,
        out: Out,
    ) -> bool:
        """Kafka's GroupMetadataManager.maybeUpdateRegularExpressions: True if the member
        took a regex already resolved (the epoch bumps now). A regex not yet resolved, new
        topics or an old resolution ask the shell to resolve the group's regexes
        (``ResolveRegexes``), at most one at a time and not within
        ``consumer_regex_refresh_min_interval_ms`` of the last resolution."""
        new_regex = member.subscribed_topic_regex
        _prune_regexes(cg)  # the old regex's last subscriber left it (Kafka's tombstone)
        resolved_now = refresh = False
        if new_regex != old_regex and new_regex is not None:
            if new_regex in cg.resolved_regexes:
                resolved_now = True
            else:
                refresh = True
        counts = cg.subscribed_regexes()
        if not counts or cg.regex_refresh_scheduled:
            return resolved_now
        first = next(iter(cg.resolved_regexes.values()), None)  # all resolved together
        if (
            first is not None
            and now <= first.timestamp_ms + self.cfg.consumer_regex_refresh_min_interval_ms
        ):
            return resolved_now
        refresh = (
            refresh
            or set(counts) != set(cg.resolved_regexes)
            or first is None
            or first.version < self._topic_names_version(topics)
            or now > first.timestamp_ms + self.cfg.consumer_regex_refresh_interval_ms
        )
        if refresh:
            cg.regex_refresh_scheduled = True
            out.effects.append(ResolveRegexes(cg.group_id, frozenset(counts)))
        return resolved_now

    def _topic_names_version(self, topics: TopicMetadata) -> int:
        """Kafka's lastMetadataImageWithNewTopics: a count of the times a topic name not
        seen before appeared (a resolution older than it may miss a match)."""
        seen = self._seen_topic_names
        if len(topics) != len(seen) or any(name not in seen for name in topics):
            if any(name not in seen for name in topics):
                self._new_topics_version += 1
            self._seen_topic_names = frozenset(topics)
        return self._new_topics_version

    def regexes_resolved(
        self,
        group_id: str,
        resolved: Mapping[str, frozenset[str]],
        topics: TopicMetadata,
        now: int,
    ) -> None:
        """The shell resolved the group's regexes (``ResolveRegexes``) against ``topics``
        at ``now``: Kafka's GroupMetadataManager.handleRegularExpressionsResult. A changed
        match bumps the group epoch; the next heartbeat computes the target assignment."""
        holder = self.reg.groups.get(group_id)
        cg = None if holder is None else holder.consumer
        if cg is None:
            return  # gone meanwhile
        cg.regex_refresh_scheduled = False
        version = self._topic_names_version(topics)
        counts = cg.subscribed_regexes()
        bump = False
        for regex, names in resolved.items():
            if not counts[regex]:
                continue  # no member subscribes to it any more
            old = cg.resolved_regexes.get(regex)
            if old is None or old.topics != names:
                bump = True
            cg.resolved_regexes[regex] = ResolvedRegex(names, version, now)
        if self.refresh_topics(cg, topics):
            bump = True
        if bump:
            cg.group_epoch += 1

    def refresh_topics(self, cg: ConsumerGroup, topics: TopicMetadata) -> bool:
        """Record the subscribed topics' ids and partition counts (names, and the resolved
        regexes' matches: Kafka's computeSubscribedTopicNames); True if they changed."""
        _prune_regexes(cg)
        names: set[str] = set()
        for m in cg.members.values():
            names.update(_member_topic_names(cg, m))
        subscribed = {name: topics[name] for name in sorted(names) if name in topics}
        if subscribed == cg.topics:
            return False
        cg.topics = subscribed
        return True

    @staticmethod
    def assign(cg: ConsumerGroup) -> None:
        votes = Counter(m.server_assignor for m in cg.members.values() if m.server_assignor)
        cg.assignor = votes.most_common(1)[0][0] if votes else DEFAULT_ASSIGNOR
        # TargetAssignmentBuilder: a member's topics are its names and its regex's
        # resolved matches (none while unresolved).
        subs = {
            m.member_id: frozenset(
                cg.topics[name].topic_id for name in _member_topic_names(cg, m) if name in cg.topics
            )
            for m in cg.members.values()
        }
        spec = AssignorInput(
            subs,
            {info.topic_id: info.partitions for info in cg.topics.values()},
            cg.target,
        )
        cg.target = ASSIGNORS[cg.assignor](spec)
        cg.assignment_epoch = cg.group_epoch

    # -- leaving and expiry ---------------------------------------------------------------

    def _leave(
        self, holder: Group, cg: ConsumerGroup, req: ConsumerHeartbeatRequest, now: int, out: Out
    ) -> ConsumerHeartbeatReply:
        member = cg.members.get(req.member_id)
        if member is None:
            return ConsumerHeartbeatReply(E.unknown_member_id, member_id=req.member_id)
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return ConsumerHeartbeatReply(E.fenced_instance_id, member_id=req.member_id)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # Keeps its partitions for a rejoin under the same instance id, until its
            # session expires; no rebalance meanwhile.
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.session_deadline_ms = now + _session_timeout_ms(self.cfg, req)
            member.rebalance_deadline_ms = None
        else:
            self.fence(holder, cg, member, now, out)
        return ConsumerHeartbeatReply(
            E.none, member_id=req.member_id, member_epoch=req.member_epoch
        )

    def fence(
        self, holder: Group, cg: ConsumerGroup, member: ConsumerMember, now: int, out: Out
    ) -> None:
        """Kafka's consumerGroupFenceMember: the member goes, and the group may turn classic
        if only classic members remain (else the group epoch bumps)."""
        if self.migration is not None and self.migration.downgrade(holder, cg, member, now, out):
            return
        self.remove_member(holder, cg, member, now)

    def remove_member(
        self, holder: Group, cg: ConsumerGroup, member: ConsumerMember, now: int
    ) -> None:
        self.drop(cg, member)
        _prune_regexes(cg)
        cg.group_epoch += 1
        if cg.members:
            self.assign(cg)
        else:
            cg.target = {}
            cg.assignment_epoch = cg.group_epoch
            holder.state_timestamp_ms = now  # offsets' retention counts from here

    @staticmethod
    def drop(cg: ConsumerGroup, member: ConsumerMember) -> None:
        del cg.members[member.member_id]
        cg.target.pop(member.member_id, None)
        if member.instance_id is not None and cg.static_members.get(member.instance_id) == (
            member.member_id
        ):
            del cg.static_members[member.instance_id]

    def expire(self, holder: Group, now: int, out: Out) -> bool:
        """Fence members whose session ended, who did not revoke in time, or (classic
        members) did not rejoin or sync in time; True if any."""
        fenced = False
        for member in list(holder.consumer.members.values() if holder.consumer else ()):
            cg = holder.consumer
            if cg is None:
                break  # downgraded meanwhile: the classic timers take over
            if cg.members.get(member.member_id) is not member:
                continue
            deadlines = (
                member.session_deadline_ms,
                member.rebalance_deadline_ms,
                member.join_deadline_ms,
                member.sync_deadline_ms,
            )
            if any(t is not None and now >= t for t in deadlines):
                self.fence(holder, cg, member, now, out)
                fenced = True
        return fenced

    # -- describe -------------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        holder = self.reg.groups.get(group_id)
        if holder is None:
            return DescribedConsumerGroup(
                E.group_id_not_found, group_id, error_message=f"Group {group_id} not found."
            )
        cg = holder.consumer
        if cg is None:
            return DescribedConsumerGroup(
                E.group_id_not_found,
                group_id,
                error_message=f"Group {group_id} is not a consumer group.",
            )
        names = {info.topic_id: name for name, info in cg.topics.items()}
        return DescribedConsumerGroup(
            E.none,
            group_id,
            cg.state().value,
            cg.group_epoch,
            cg.assignment_epoch,
            cg.assignor,
            tuple(
                DescribedConsumerMember(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.subscribed_topic_regex,
                    _described(m.assigned, names),
                    _described(cg.target.get(m.member_id, {}), names),
                    m.classic is not None,
                )
                for m in cg.members.values()
            ),
        )


def _member_topic_names(cg: ConsumerGroup, member: ConsumerMember) -> set[str]:
    names = set(member.subscribed_topic_names)
    regex = member.subscribed_topic_regex
    resolved = None if regex is None else cg.resolved_regexes.get(regex)
    if resolved is not None:
        names.update(resolved.topics)
    return names


def _prune_regexes(cg: ConsumerGroup) -> None:
    """Forget the resolution of a regex no member subscribes to any more (Kafka writes its
    ConsumerGroupRegularExpression tombstone when its last subscriber goes)."""
    if cg.resolved_regexes:
        counts = cg.subscribed_regexes()
        for regex in [r for r in cg.resolved_regexes if not counts[r]]:
            del cg.resolved_regexes[regex]


def _partitions(owned: TopicIdPartitions | None) -> Partitions | None:
    if owned is None:
        return None
    return {t: frozenset(ps) for t, ps in owned if ps}


def _subset(a: Partitions, b: Partitions) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def _wire(parts: Partitions) -> TopicIdPartitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items(), key=lambda i: str(i[0])))


def _described(
    parts: Partitions, names: Mapping[uuid.UUID, str]
) -> tuple[DescribedTopicPartitions, ...]:
    return tuple(
        DescribedTopicPartitions(t, names.get(t, ""), tuple(sorted(ps)))
        for t, ps in sorted(parts.items(), key=lambda i: str(i[0]))
    )


def _session_timeout_ms(cfg: GroupConfig, req: ConsumerHeartbeatRequest) -> int:
    """The group's consumer.session.timeout.ms, else the broker's (Kafka's
    GroupMetadataManager.consumerGroupSessionTimeoutMs)."""
    return req.session_timeout_ms or cfg.consumer_session_timeout_ms
