"""Random joins, syncs, heartbeats, leaves, commits, clock jumps and restarts against the
group coordinator, with the machine playing both the clients and the async shell.

Invariants: generations never go back (within one coordinator's life); in Stable every
dynamic member received the current generation; static instance ids map one-to-one onto
members; every parked request belongs to exactly one member and is answered exactly once;
a member with an old generation never gets an offset commit through; and a coordinator
rebuilt from its log has the same committed offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from oncelog.group import (
    CommitPartition,
    Group,
    GroupConfig,
    GroupState,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    Pending,
    Reply,
    Step,
    SyncGroupReply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.offsets_codec import decode_record
from tests.unit.test_group_support import Harness, subscription

E = ErrorCode
S = GroupState
G = "g"
PROTOCOLS = [
    (("range", subscription("t1")),),
    (("range", subscription("t1", "t2")), ("rr", subscription("t1"))),
]
RESET = {E.unknown_member_id, E.fenced_instance_id}


@dataclass
class Actor:
    name: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    members: list[str] = field(default_factory=list)  # set when the actor is the leader
    join: int | None = None  # outstanding tokens
    sync: int | None = None
    synced: int = -1  # the generation whose assignment the actor has
    rejoin: bool = False  # the coordinator told it to (REBALANCE_IN_PROGRESS, ...)
    stuck: bool = False  # its poll loop hangs, only the heartbeat thread runs

    def reset(self) -> None:
        self.member_id, self.generation, self.members = "", -1, []
        self.synced, self.rejoin = -1, True


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(GroupConfig(initial_rebalance_delay_ms=1_000))
        self.actors = [Actor("a0", None), Actor("a1", None), Actor("s2", "i2"), Actor("s3", "i3")]
        self.outstanding: dict[int, tuple[Actor, str]] = {}
        self.join_gen: dict[str, int] = {}  # member id -> generation of its last join reply
        self.max_gen = 0
        self.next_pid = 1000
        self.zombies: list[tuple[int, str, str | None]] = []  # credentials of restarted actors

    # -- the shell ------------------------------------------------------------------------

    def run(self, step: Step, actor: Actor | None = None, kind: str = "") -> Reply | None:
        for append in step.appends:
            for key, value in append.records:
                decode_record(key, value)  # every record decodes
        self.h.run(step)
        for token, reply in step.resolved:
            assert token in self.outstanding, f"unexpected or repeated token {token}"
            owner, what = self.outstanding.pop(token)
            self.deliver(owner, what, reply)
        if isinstance(step.reply, Pending):
            assert actor is not None
            self.outstanding[step.reply.token] = (actor, kind)
            if kind == "join":
                actor.join = step.reply.token
            else:
                actor.sync = step.reply.token
            return None
        if actor is not None and kind in ("join", "sync"):
            assert step.reply is not None
            self.deliver(actor, kind, step.reply)
        return step.reply

    def deliver(self, actor: Actor, kind: str, reply: Reply) -> None:
        if kind == "join":
            actor.join = None
            assert isinstance(reply, JoinGroupReply)
            if reply.error is E.none:
                actor.member_id, actor.generation = reply.member_id, reply.generation_id
                actor.members = [m.member_id for m in reply.members]
                actor.rejoin = False
                self.join_gen[reply.member_id] = reply.generation_id
            elif reply.error is E.member_id_required:
                actor.member_id = reply.member_id
            elif reply.error in RESET:
                actor.reset()
        else:
            actor.sync = None
            assert isinstance(reply, SyncGroupReply)
            if reply.error is E.none:
                actor.synced = actor.generation
            elif reply.error in RESET:
                actor.reset()
            else:
                actor.rejoin = True

    @property
    def group(self) -> Group | None:
        return self.h.coord.group(G)

    # -- rules ----------------------------------------------------------------------------

    actor_idx = st.integers(0, 3)

    @rule(i=actor_idx, proto=st.integers(0, 1), version=st.sampled_from([3, 9]))
    def join(self, i: int, proto: int, version: int) -> None:
        a = self.actors[i]
        if a.join is not None or a.sync is not None:
            return
        req = JoinGroupRequest(
            G,
            a.member_id,
            "consumer",
            PROTOCOLS[proto],
            10_000,
            5_000,
            a.instance,
            a.name,
            "/h",
            version,
        )
        self.run(self.h.coord.join_group(req, self.h.now), a, "join")

    @rule(i=actor_idx)
    def sync(self, i: int) -> None:
        a = self.actors[i]
        if a.join is not None or a.sync is not None or a.generation < 0:
            return
        assignments = tuple((m, m.encode()) for m in a.members)
        req = SyncGroupRequest(G, a.generation, a.member_id, a.instance, assignments=assignments)
        self.run(self.h.coord.sync_group(req, self.h.now), a, "sync")

    @rule(i=actor_idx)
    def heartbeat(self, i: int) -> None:
        a = self.actors[i]
        if not a.member_id:
            return
        req = HeartbeatRequest(G, a.generation, a.member_id, a.instance)
        reply = self.run(self.h.coord.heartbeat(req, self.h.now))
        assert reply is not None
        if a.join is None and a.sync is None:
            if reply.error in RESET:  # type: ignore[union-attr]
                a.reset()
            elif reply.error is not E.none:  # type: ignore[union-attr]
                a.rejoin = True

    @rule(i=st.none() | actor_idx)
    def poll(self, i: int | None) -> None:
        """What a live client does next (every client, if ``i`` is None)."""
        for a in self.actors if i is None else [self.actors[i]]:
            if a.join is not None or a.sync is not None:
                continue
            idx = self.actors.index(a)
            if a.stuck:
                if a.member_id:
                    self.heartbeat(idx)
            elif a.rejoin or a.generation < 0:
                self.join(idx, 0, 9)
            elif a.synced != a.generation:
                self.sync(idx)
            else:
                self.heartbeat(idx)

    @rule(i=actor_idx, by_instance=st.booleans())
    def leave(self, i: int, by_instance: bool) -> None:
        a = self.actors[i]
        if not a.member_id or a.join is not None or a.sync is not None:
            return
        who = (
            LeaveMember("", a.instance)
            if by_instance and a.instance
            else LeaveMember(a.member_id, a.instance)
        )
        self.run(self.h.coord.leave_group(LeaveGroupRequest(G, (who,)), self.h.now))
        a.reset()

    @rule(i=actor_idx)
    def restart(self, i: int) -> None:
        """The process dies and comes back: it forgets its member id (a zombie lingers)."""
        a = self.actors[i]
        if a.member_id:
            self.zombies.append((a.generation, a.member_id, a.instance))
        # Requests the old incarnation left parked are answered to a ghost.
        ghost = Actor(a.name + "-ghost", a.instance)
        for token, (owner, what) in list(self.outstanding.items()):
            if owner is a:
                self.outstanding[token] = (ghost, what)
        a.reset()
        a.join = a.sync = None

    @rule(i=actor_idx, stuck=st.booleans())
    def hang(self, i: int, stuck: bool) -> None:
        self.actors[i].stuck = stuck

    @rule(rounds=st.integers(1, 12))
    def settle(self, rounds: int) -> None:
        """Live clients polling while time passes: drives the group towards Stable."""
        for _ in range(rounds):
            self.poll(None)
            self.check()
            group = self.group
            if (
                group is not None
                and group.state is S.STABLE
                and all(a.synced == a.generation >= 0 for a in self.actors if a.member_id)
            ):
                return
            self.advance(1_000)
            self.check()

    @rule(i=actor_idx, txn=st.booleans(), offset=st.integers(0, 100), simple=st.booleans())
    def commit(self, i: int, txn: bool, offset: int, simple: bool) -> None:
        a = self.actors[i]
        creds = (-1, "", None) if simple else (a.generation, a.member_id, a.instance)
        self._commit(*creds, txn=txn, offset=offset)

    @rule(i=actor_idx, txn=st.booleans(), lag=st.integers(1, 3))
    def lagging_commit(self, i: int, txn: bool, lag: int) -> None:
        """A thread still holding the group metadata of an older generation (KIP-447)."""
        a = self.actors[i]
        if a.generation - lag >= 0:
            self._commit(a.generation - lag, a.member_id, a.instance, txn=txn, offset=998)

    @precondition(lambda self: self.zombies)
    @rule(data=st.data(), txn=st.booleans())
    def zombie_commit(self, data: st.DataObject, txn: bool) -> None:
        """A restarted process's old incarnation wakes up and commits."""
        gen, mid, iid = data.draw(st.sampled_from(self.zombies))
        self._commit(gen, mid, iid, txn=txn, offset=999)

    def _commit(self, gen: int, mid: str, iid: str | None, *, txn: bool, offset: int) -> None:
        group = self.group
        current = group.generation_id if group is not None else 0
        topics = (("t1", (CommitPartition(0, offset),)),)
        if txn:
            pid, self.next_pid = self.next_pid, self.next_pid + 1
            step = self.h.coord.txn_offset_commit(
                TxnOffsetCommitRequest("tx", G, pid, 0, topics, gen, mid, iid), self.h.now
            )
        else:
            step = self.h.coord.offset_commit(
                OffsetCommitRequest(G, topics, gen, mid, iid), self.h.now
            )
        reply = self.run(step)
        ok = reply.topics[0][1][0][1] is E.none  # type: ignore[union-attr]
        if ok and gen >= 0:
            # Never from an old generation, and only from a current member.
            assert gen == current, (gen, current)
            assert self.group is not None and mid in self.group.members
        if txn and ok:
            self.h.complete_txn(pid, commit=offset % 2 == 0)

    @rule(ms=st.sampled_from([1, 400, 1_000, 5_000, 11_000, 25_000]))
    def advance(self, ms: int) -> None:
        self.h.now += ms
        self.run(self.h.coord.tick(self.h.now))

    @rule(dice=st.integers(0, 9))
    def reload(self, dice: int) -> None:
        """The broker restarts: parked requests fail, the state comes back from the log."""
        if dice:
            return  # (rarely: a restart aborts everything in flight)
        before = _committed(self.group)
        for token, reply in self.h.coord.abandon(E.not_coordinator):
            owner, what = self.outstanding.pop(token)
            self.deliver(owner, what, reply)
        group = self.h.reload().group(G)
        assert _committed(group) == before
        self.max_gen = 0 if group is None else group.generation_id
        if group is not None:
            for mid in group.members:
                self.join_gen[mid] = group.generation_id

    # -- invariants -----------------------------------------------------------------------

    def check(self) -> None:
        self.generation_never_decreases()
        self.stable_members_have_latest_generation()
        self.static_ids_are_unique()
        self.parked_requests_belong_to_members()
        self.state_is_consistent()

    @invariant()
    def generation_never_decreases(self) -> None:
        group = self.group
        if group is None:
            self.max_gen = 0  # an expired group starts over
            return
        assert group.generation_id >= self.max_gen
        self.max_gen = group.generation_id

    @invariant()
    def stable_members_have_latest_generation(self) -> None:
        group = self.group
        if group is None or group.state is not S.STABLE:
            return
        for mid, m in group.members.items():
            if m.group_instance_id is None:
                assert self.join_gen.get(mid) == group.generation_id, mid
            else:  # a static member that did not rejoin stays, one generation behind
                assert self.join_gen.get(mid, -1) <= group.generation_id

    @invariant()
    def static_ids_are_unique(self) -> None:
        group = self.group
        if group is None:
            return
        instances = [m.group_instance_id for m in group.members.values() if m.group_instance_id]
        assert len(instances) == len(set(instances))
        assert group.static_members == {
            m.group_instance_id: mid for mid, m in group.members.items() if m.group_instance_id
        }

    @invariant()
    def parked_requests_belong_to_members(self) -> None:
        group = self.group
        held: set[int] = set()
        if group is not None:
            for m in group.members.values():
                held.update(t for t in (m.join_token, m.sync_token) if t is not None)
        assert held == set(self.outstanding)

    @invariant()
    def state_is_consistent(self) -> None:
        group = self.group
        if group is None:
            return
        assert (group.leader_id is None) == (not group.members)
        assert group.leader_id is None or group.leader_id in group.members
        assert group.pending_sync <= set(group.members)
        if group.state is S.EMPTY:
            assert not group.members
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            assert group.protocol_name is not None and group.members
        if group.state is S.PREPARING_REBALANCE:
            assert group.join_deadline_ms is not None
        if group.state is not S.COMPLETING_REBALANCE:
            assert all(m.sync_token is None for m in group.members.values())


def _committed(group: Group | None) -> dict[tuple[str, int], tuple[int, str]]:
    if group is None:
        return {}
    return {tp: (o.offset, o.metadata) for tp, o in group.offsets.items()}


GroupMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupMachine = GroupMachine.TestCase
