"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Semantics follow Kafka's classic group coordinator. Handlers return the reply, or ``None``
when the request is parked on a member (its token is answered later through
``Out.resolve``). Timers are deadlines on the group, fired by ``advance``; a timer fires
with its own deadline as the clock, so the outcome does not depend on when the shell ticks.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog.group.core import Registry
from oncelog.group.messages import (
    HeartbeatReply,
    HeartbeatRequest,
    JoinGroupMember,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupReply,
    LeaveGroupRequest,
    LeaveMemberResult,
    Out,
    SyncGroupReply,
    SyncGroupRequest,
)
from oncelog.group.state import Group, GroupState, Member

E = ErrorCode
S = GroupState


class Membership:
    def __init__(self, registry: Registry) -> None:
        self.reg = registry
        self.cfg = registry.config

    # -- JoinGroup ------------------------------------------------------------------------

    def join(self, req: JoinGroupRequest, token: int, now: int, out: Out) -> JoinGroupReply | None:
        if not req.group_id:
            return JoinGroupReply(E.invalid_group_id, member_id=req.member_id)
        if not (
            self.cfg.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.cfg.max_session_timeout_ms
        ):
            return JoinGroupReply(E.invalid_session_timeout, member_id=req.member_id)
        unknown = req.member_id == ""
        group = self.reg.groups.get(req.group_id)
        if group is None:
            if not unknown:
                return JoinGroupReply(E.unknown_member_id, member_id=req.member_id)
            group = self.reg.get_or_create(req.group_id, now)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return JoinGroupReply(E.inconsistent_group_protocol, member_id=req.member_id)
        if not self._accepts(group, req.member_id):
            return self._refuse_over_capacity(group, req.member_id, now, out)
        if unknown:
            reply = self._join_new(group, req, token, now, out)
        else:
            reply = self._join_known(group, req, token, now, out)
        self._maybe_complete_join(group, now, out)
        return reply

    def _accepts(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: room for one more under ``group.max.size``."""
        limit = self.cfg.classic_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state is S.PREPARING_REBALANCE:
            # Counting the members that already rejoined (not the group's size, which may be
            # over a lowered limit) lets the last ones to rejoin be the ones left out.
            member = group.members.get(member_id)
            if member is not None and member.awaiting_join:
                return True
            return sum(m.awaiting_join for m in group.members.values()) < limit
        return member_id in group.members or len(group.members) < limit

    def _refuse_over_capacity(
        self, group: Group, member_id: str, now: int, out: Out
    ) -> JoinGroupReply:
        """GROUP_MAX_SIZE_REACHED; a member already in the group leaves it, which may
        complete the join phase the others are waiting in."""
        group.pending_members.pop(member_id, None)
        member = group.members.get(member_id)
        if member is not None:
            self._remove(group, member, out)
            self._maybe_complete_join(group, now, out)
        return JoinGroupReply(E.group_max_size_reached, member_id="")

    def _join_new(
        self, group: Group, req: JoinGroupRequest, token: int, now: int, out: Out
    ) -> JoinGroupReply | None:
        new_id = self.reg.new_member_id(req.client_id)
        iid = req.group_instance_id
        if iid is not None:
            old_id = group.static_members.get(iid)
            if old_id is not None:
                return self._replace_static(group, req, iid, old_id, new_id, token, now, out)
        elif req.api_version >= 4:
            # KIP-394: hand out the id first, so a client that never comes back (request
            # timeout during a long rebalance) leaves only a short-lived pending entry.
            group.pending_members[new_id] = now + req.session_timeout_ms
            return JoinGroupReply(E.member_id_required, member_id=new_id)
        self._add_member_and_rebalance(group, req, new_id, token, now, out)
        return None

    def _join_known(
        self, group: Group, req: JoinGroupRequest, token: int, now: int, out: Out
    ) -> JoinGroupReply | None:
        mid = req.member_id
        if mid in group.pending_members:
            self._add_member_and_rebalance(group, req, mid, token, now, out)
            return None
        iid = req.group_instance_id
        if group.static_member_fenced(iid, mid):
            return JoinGroupReply(E.fenced_instance_id, member_id=mid)
        member = group.members.get(mid)
        if member is None or (iid is not None and iid not in group.static_members):
            return JoinGroupReply(E.unknown_member_id, member_id=mid)
        state = group.state
        if state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, token, now, out)
            return None
        if state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # Its JoinGroup response was probably lost: answer with this generation again.
                return self._generation_reply(group, member, with_members=group.is_leader(mid))
            self._update_member_and_rebalance(group, member, req, token, now, out)
            return None
        if state is S.STABLE:
            # A rejoining leader forces a rebalance: that is how it reacts to metadata changes
            # (new partitions) that do not change any member's subscription.
            if group.is_leader(mid) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, token, now, out)
                return None
            return self._generation_reply(group, member, with_members=False)
        return JoinGroupReply(E.unknown_member_id, member_id=mid)

    def _generation_reply(
        self,
        group: Group,
        member: Member,
        with_members: bool,
        *,
        skip_assignment: bool = False,
        leader: str | None = None,
    ) -> JoinGroupReply:
        """The current generation, as JoinGroup answers it (``leader``: instead of the
        group's leader)."""
        return JoinGroupReply(
            E.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(group.leader_id if leader is None else leader) or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=self._member_list(group) if with_members else (),
        )

    def _member_list(self, group: Group) -> tuple[JoinGroupMember, ...]:
        proto = group.protocol_name
        assert proto is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(proto))
            for m in group.members.values()
        )

    def _add_member_and_rebalance(
        self, group: Group, req: JoinGroupRequest, member_id: str, token: int, now: int, out: Out
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            _rebalance_timeout(req),
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            is_new=True,
        )
        if group.state is S.PREPARING_REBALANCE and group.initial_delay:
            group.new_member_added = True
        group.add(member, token)
        # Not the session timeout: a new member cannot heartbeat while its join is parked.
        member.heartbeat_deadline_ms = now + self.cfg.new_member_join_timeout_ms
        self._maybe_prepare_rebalance(group, now, out)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinGroupRequest, token: int, now: int, out: Out
    ) -> None:
        if member.join_token is not None:
            # Superseded by this retry; the old connection has likely given up on it.
            out.resolve(
                member.join_token,
                JoinGroupReply(E.rebalance_in_progress, member_id=member.member_id),
            )
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = _rebalance_timeout(req)
        member.session_timeout_ms = req.session_timeout_ms
        member.join_token = token
        self._maybe_prepare_rebalance(group, now, out)

    def _replace_static(
        self,
        group: Group,
        req: JoinGroupRequest,
        iid: str,
        old_id: str,
        new_id: str,
        token: int,
        now: int,
        out: Out,
    ) -> JoinGroupReply | None:
        """A static member restarted (it forgot its member id): the new id takes over the old
        one's place and assignment, and whatever the old id still has parked is fenced."""
        old_leader = group.leader_id
        old = group.members[old_id]
        if old.join_token is not None:
            out.resolve(old.join_token, JoinGroupReply(E.fenced_instance_id, member_id=old_id))
            old.join_token = None
        if old.sync_token is not None:
            out.resolve(old.sync_token, SyncGroupReply(E.fenced_instance_id))
            old.sync_token = None
        member = group.replace_static(iid, old_id, new_id)
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = _rebalance_timeout(req)
        member.session_timeout_ms = req.session_timeout_ms
        member.join_token = token
        if group.state is S.STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, now, out)
                return None
            # Same protocol: no rebalance, just persist the new member id.
            member.join_token = None
            self.reg.store_group(group, out)
            if req.api_version >= 9:
                # KIP-814: a replaced leader learns it leads but keeps the current assignment.
                is_leader = group.is_leader(new_id)
                return self._generation_reply(
                    group, member, with_members=is_leader, skip_assignment=is_leader
                )
            # Older clients get the old leader id, so a replaced leader does not run an
            # assignment that a Stable group would never hand out.
            return self._generation_reply(
                group, member, with_members=False, leader=old_leader or ""
            )
        if group.state is S.COMPLETING_REBALANCE:
            # The leader may be assigning to the old id: rebalance so the new id gets a share.
            self._prepare_rebalance(group, now, out)
        return None

    # -- rebalance ------------------------------------------------------------------------

    def rebalance(self, group: Group, now: int, out: Out) -> None:
        """Start a rebalance of a Stable (or Empty, or CompletingRebalance) group."""
        self._prepare_rebalance(group, now, out)

    def _maybe_prepare_rebalance(self, group: Group, now: int, out: Out) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, now, out)

    def _prepare_rebalance(self, group: Group, now: int, out: Out) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._propagate_assignment_error(group, E.rebalance_in_progress, now, out)
        group.sync_deadline_ms = None
        if group.state is S.EMPTY:
            delay = self.cfg.initial_rebalance_delay_ms
            group.initial_delay = True
            group.new_member_added = False
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline_ms = now + delay
        else:
            group.initial_delay = False
            group.join_deadline_ms = now + group.rebalance_timeout_ms()
        group.transition(S.PREPARING_REBALANCE, now)
        self._maybe_complete_join(group, now, out)

    def _maybe_complete_join(self, group: Group, now: int, out: Out) -> None:
        if group.state is S.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(group, now, out)

    def _on_join_deadline(self, group: Group, now: int, out: Out) -> None:
        if group.initial_delay and group.new_member_added and group.initial_remaining_ms > 0:
            group.new_member_added = False
            previous = group.initial_delay_ms
            group.initial_delay_ms = min(
                self.cfg.initial_rebalance_delay_ms, group.initial_remaining_ms
            )
            group.initial_remaining_ms = max(group.initial_remaining_ms - previous, 0)
            group.join_deadline_ms = now + group.initial_delay_ms
            return
        self._complete_join(group, now, out)

    def _complete_join(self, group: Group, now: int, out: Out) -> None:
        # Dynamic members that did not rejoin in time are dropped; static ones are kept (their
        # session timeout decides) and are part of the new generation.
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            if m.group_instance_id is None:
                self._remove(group, m, out)
        group.initial_delay = False
        group.new_member_added = False
        if group.members and not any(m.awaiting_join for m in group.members.values()):
            # Nobody rejoined: wait another round for joins or session expiries (at least
            # 1 ms, so a zero rebalance timeout cannot spin).
            group.join_deadline_ms = now + max(group.rebalance_timeout_ms(), 1)
            return
        group.join_deadline_ms = None
        leader = group.members.get(group.leader_id or "")
        if leader is not None and not leader.awaiting_join:
            group.leader_id = next(m.member_id for m in group.members.values() if m.awaiting_join)
        group.generation_id += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            group.transition(S.EMPTY, now)
            self.reg.store_group(group, out)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.current_subscriptions()
        group.transition(S.COMPLETING_REBALANCE, now)
        members = self._member_list(group)
        for m in group.members.values():
            if m.join_token is not None:
                is_leader = group.is_leader(m.member_id)
                out.resolve(
                    m.join_token,
                    JoinGroupReply(
                        E.none,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=group.leader_id or "",
                        member_id=m.member_id,
                        members=members if is_leader else (),
                    ),
                )
                m.join_token = None
            m.heartbeat_deadline_ms = now + m.session_timeout_ms
            m.is_new = False
            group.pending_sync.add(m.member_id)
        group.sync_deadline_ms = now + group.rebalance_timeout_ms()

    def _propagate_assignment_error(
        self, group: Group, error: ErrorCode, now: int, out: Out
    ) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                out.resolve(m.sync_token, SyncGroupReply(error))
                m.sync_token = None
                m.heartbeat_deadline_ms = now + m.session_timeout_ms

    def _remove(self, group: Group, member: Member, out: Out) -> None:
        """Drop a member, answering whatever it has parked (the client must rejoin)."""
        if member.join_token is not None:
            out.resolve(member.join_token, JoinGroupReply(E.unknown_member_id))
            member.join_token = None
        if member.sync_token is not None:
            out.resolve(member.sync_token, SyncGroupReply(E.unknown_member_id))
            member.sync_token = None
        group.remove(member.member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None

    def _remove_and_update(self, group: Group, member: Member, now: int, out: Out) -> None:
        self._remove(group, member, out)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now, out)
        else:
            self._maybe_complete_join(group, now, out)

    # -- SyncGroup ------------------------------------------------------------------------

    def sync(self, req: SyncGroupRequest, token: int, now: int, out: Out) -> SyncGroupReply | None:
        if not req.group_id:
            return SyncGroupReply(E.invalid_group_id)
        group = self.reg.groups.get(req.group_id)
        if group is None:
            return SyncGroupReply(E.unknown_member_id)
        mid = req.member_id
        if group.static_member_fenced(req.group_instance_id, mid):
            return SyncGroupReply(E.fenced_instance_id)
        member = group.members.get(mid)
        if member is None:
            return SyncGroupReply(E.unknown_member_id)
        if req.generation_id != group.generation_id:
            return SyncGroupReply(E.illegal_generation)
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            return SyncGroupReply(E.inconsistent_group_protocol)
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            return SyncGroupReply(E.inconsistent_group_protocol)
        if group.state is S.PREPARING_REBALANCE:
            return SyncGroupReply(E.rebalance_in_progress)
        if group.state is S.STABLE:
            self._synced(group, mid)
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
            return SyncGroupReply(
                E.none, group.protocol_type, group.protocol_name, member.assignment
            )
        if group.state is not S.COMPLETING_REBALANCE:
            return SyncGroupReply(E.unknown_member_id)
        if member.sync_token is not None:
            out.resolve(member.sync_token, SyncGroupReply(E.rebalance_in_progress))
        member.sync_token = token
        self._synced(group, mid)
        if group.is_leader(mid):
            assignment = dict(req.assignments)
            for m in group.members.values():
                m.assignment = assignment.get(m.member_id, b"")  # missing members get nothing
            group.transition(S.STABLE, now)
            self.reg.store_group(group, out)
            for m in group.members.values():
                if m.sync_token is not None:
                    out.resolve(
                        m.sync_token,
                        SyncGroupReply(
                            E.none, group.protocol_type, group.protocol_name, m.assignment
                        ),
                    )
                    m.sync_token = None
                    m.heartbeat_deadline_ms = now + m.session_timeout_ms
        return None

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None

    def _on_sync_deadline(self, group: Group, now: int, out: Out) -> None:
        group.sync_deadline_ms = None
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        for mid in list(group.pending_sync):
            self._remove(group, group.members[mid], out)
        self._maybe_prepare_rebalance(group, now, out)

    # -- Heartbeat ------------------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, now: int) -> HeartbeatReply:
        if not req.group_id:
            return HeartbeatReply(E.invalid_group_id)
        group = self.reg.groups.get(req.group_id)
        if group is None:
            return HeartbeatReply(E.unknown_member_id)
        if group.static_member_fenced(req.group_instance_id, req.member_id):
            return HeartbeatReply(E.fenced_instance_id)
        member = group.members.get(req.member_id)
        if member is None:
            return HeartbeatReply(E.unknown_member_id)
        if req.generation_id != group.generation_id:
            return HeartbeatReply(E.illegal_generation)
        if group.state is S.EMPTY:
            return HeartbeatReply(E.unknown_member_id)
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return HeartbeatReply(E.rebalance_in_progress)
        return HeartbeatReply(E.none)

    def touch(self, group: Group, member_id: str, now: int) -> None:
        """An accepted offset commit counts as a heartbeat in Stable/PreparingRebalance."""
        member = group.members.get(member_id)
        if member is not None and group.state in (S.STABLE, S.PREPARING_REBALANCE):
            member.heartbeat_deadline_ms = now + member.session_timeout_ms

    # -- LeaveGroup -----------------------------------------------------------------------

    def leave(self, req: LeaveGroupRequest, now: int, out: Out) -> LeaveGroupReply:
        if not req.group_id:
            return LeaveGroupReply(E.invalid_group_id)
        group = self.reg.groups.get(req.group_id)
        results = []
        for lm in req.members:
            if group is None:
                error = E.unknown_member_id
            elif lm.member_id == "":
                # Admin removal of a static member by instance id.
                current = group.static_members.get(lm.group_instance_id or "")
                if lm.group_instance_id is not None and current is not None:
                    self._remove_and_update(group, group.members[current], now, out)
                    error = E.none
                else:
                    error = E.unknown_member_id
            elif lm.member_id in group.pending_members:
                del group.pending_members[lm.member_id]
                self._maybe_complete_join(group, now, out)
                error = E.none
            elif group.static_member_fenced(lm.group_instance_id, lm.member_id):
                error = E.fenced_instance_id
            elif lm.member_id in group.members:
                self._remove_and_update(group, group.members[lm.member_id], now, out)
                error = E.none
            else:
                error = E.unknown_member_id
            results.append(LeaveMemberResult(lm.member_id, lm.group_instance_id, error))
        return LeaveGroupReply(E.none, tuple(results))

    # -- timers ---------------------------------------------------------------------------

    def advance(self, group: Group, now: int, out: Out) -> None:
        """Fire the group's due timers in deadline order, each at its own deadline."""
        while group.state is not S.DEAD:
            due = group.next_deadline()
            if due is None or due > now:
                return
            if group.join_deadline_ms == due:
                group.join_deadline_ms = None
                if group.state is S.PREPARING_REBALANCE:
                    self._on_join_deadline(group, due, out)
            elif group.sync_deadline_ms == due:
                self._on_sync_deadline(group, due, out)
            elif due in group.pending_members.values():
                mid = next(k for k, t in group.pending_members.items() if t == due)
                del group.pending_members[mid]
                self._maybe_complete_join(group, due, out)
            else:
                member = next(m for m in group.members.values() if m.heartbeat_deadline_ms == due)
                self._on_session_expired(group, member, due, out)

    def _on_session_expired(self, group: Group, member: Member, now: int, out: Out) -> None:
        member.heartbeat_deadline_ms = None
        # A parked member is exempt (its deadline restarts when it is answered), except a
        # new one, whose first JoinGroup may be abandoned.
        if member.is_new or not (member.awaiting_join or member.awaiting_sync):
            self._remove_and_update(group, member, now, out)

    def abandon(self, group: Group, error: ErrorCode, out: Out) -> None:
        """Answer every parked request of the group with ``error`` (shell giving up)."""
        for m in group.members.values():
            if m.join_token is not None:
                out.resolve(m.join_token, JoinGroupReply(error, member_id=m.member_id))
                m.join_token = None
            if m.sync_token is not None:
                out.resolve(m.sync_token, SyncGroupReply(error))
                m.sync_token = None


def rebalance_timeout(req: JoinGroupRequest) -> int:
    """A JoinGroup's rebalance timeout (v0 has none: the session timeout)."""
    return _rebalance_timeout(req)


def _rebalance_timeout(req: JoinGroupRequest) -> int:
    return req.session_timeout_ms if req.rebalance_timeout_ms < 0 else req.rebalance_timeout_ms
