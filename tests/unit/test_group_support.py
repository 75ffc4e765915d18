"""Test harness for the group coordinator: plays the async shell with an injected clock.

It appends every step's records to an in-memory ``__consumer_offsets`` log (so tests can
replay it into a fresh coordinator) and collects replies to parked requests by token.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.group import (
    CommitPartition,
    CommitReply,
    Group,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    OffsetFetchReply,
    OffsetFetchRequest,
    Pending,
    Reply,
    Step,
    SyncGroupReply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.consumer_state import TopicInfo

E = ErrorCode
T0 = 1_000_000


def subscription(*topics: str, version: int = 0) -> bytes:
    """A consumer-protocol Subscription (v0 layout; later versions only append fields)."""
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        data = t.encode()
        out += struct.pack(">h", len(data)) + data
    out += struct.pack(">i", -1)  # user_data: null
    return bytes(out)


LogEntry = tuple[int, bytes, bytes | None, int]  # partition, key, value, producer id


class Harness:
    def __init__(self, config: GroupConfig | None = None, *, now: int = T0) -> None:
        self.config = config or GroupConfig()
        self.now = now
        self.log: list[LogEntry] = []
        self.markers: list[tuple[int, int, bool]] = []  # (position in log, producer, commit)
        self.resolved: dict[int, Reply] = {}
        self._ids = itertools.count(1)
        self.coord = self.new_coordinator()
        self.coord.finish_load(now)

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, member_id_suffix=lambda: f"m{next(self._ids)}")

    # -- the shell ------------------------------------------------------------------------

    def run(self, step: Step) -> Any:
        for append in step.appends:
            for key, value in append.records:
                self.log.append((append.partition, key, value, append.producer_id))
        for token, reply in step.resolved:
            assert token not in self.resolved, f"token {token} answered twice"
            self.resolved[token] = reply
        if isinstance(step.reply, Pending):
            return self.resolved.get(step.reply.token, step.reply)
        return step.reply

    def group(self, group_id: str = "g") -> Group:
        group = self.coord.group(group_id)
        assert group is not None, f"no group {group_id}"
        return group

    def answer(self, pending: Any) -> Any:
        """The reply to an earlier parked request, or None while still parked."""
        if isinstance(pending, Pending):
            return self.resolved.get(pending.token)
        return pending

    def advance(self, ms: int) -> Step:
        self.now += ms
        step = self.coord.tick(self.now)
        self.run(step)
        return step

    def complete_txn(self, pid: int, commit: bool) -> None:
        self.markers.append((len(self.log), pid, commit))
        self.coord.complete_txn(pid, commit, None)

    def reload(self) -> GroupCoordinator:
        """Replay the log (with the markers where they were written) into a new coordinator."""
        coord = self.new_coordinator()
        markers = list(self.markers)
        for i, (_, key, value, pid) in enumerate(self.log):
            while markers and markers[0][0] == i:
                _, mpid, commit = markers.pop(0)
                coord.load_marker(mpid, commit)
            coord.load([(key, value)], producer_id=pid)
        for _, mpid, commit in markers:
            coord.load_marker(mpid, commit)
        coord.finish_load(self.now)
        self.coord = coord
        return coord

    # -- requests -------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] | None = None,
        session: int = 10_000,
        rebalance: int = 30_000,
        version: int = 9,
        client: str = "c",
        ptype: str = "consumer",
        topics: Mapping[str, TopicInfo] | None = None,
    ) -> Any:
        """``topics``: the broker's topic metadata, for a join to a consumer group."""
        req = JoinGroupRequest(
            group_id=group,
            member_id=member_id,
            protocol_type=ptype,
            protocols=protocols if protocols is not None else (("range", subscription("t1")),),
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=instance,
            client_id=client,
            client_host="/127.0.0.1",
            api_version=version,
        )
        return self.run(self.coord.join_group(req, self.now, topics))

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        ptype: str | None = None,
        pname: str | None = None,
    ) -> Any:
        req = SyncGroupRequest(
            group,
            generation,
            member_id,
            instance,
            ptype,
            pname,
            tuple((assignments or {}).items()),
        )
        return self.run(self.coord.sync_group(req, self.now))

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        step = self.coord.heartbeat(
            HeartbeatRequest(group, generation, member_id, instance), self.now
        )
        return self.run(step).error  # type: ignore[no-any-return]

    def leave(self, *members: LeaveMember, group: str = "g") -> Any:
        return self.run(self.coord.leave_group(LeaveGroupRequest(group, members), self.now))

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        metadata: str | None = None,
        version: int = 9,
        retention: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        req = OffsetCommitRequest(
            group, _topics(offsets, metadata), generation, member_id, instance, retention, version
        )
        return _flatten(self.run(self.coord.offset_commit(req, self.now)))

    def txn_commit(
        self,
        offsets: dict[tuple[str, int], int],
        pid: int,
        *,
        group: str = "g",
        epoch: int = 0,
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        req = TxnOffsetCommitRequest(
            "txn", group, pid, epoch, _topics(offsets, None), generation, member_id, instance
        )
        return _flatten(self.run(self.coord.txn_offset_commit(req, self.now)))

    def fetch(
        self,
        *tps: tuple[str, int],
        group: str = "g",
        require_stable: bool = False,
    ) -> dict[tuple[str, int], tuple[int, ErrorCode]]:
        reply = self.fetch_reply(*tps, group=group, require_stable=require_stable)
        return {(t, p.partition): (p.offset, p.error) for t, ps in reply.topics for p in ps}

    def fetch_reply(
        self, *tps: tuple[str, int], group: str = "g", require_stable: bool = False
    ) -> OffsetFetchReply:
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        req = OffsetFetchRequest(
            group,
            tuple((t, tuple(ps)) for t, ps in topics.items()) if tps else None,
            require_stable,
        )
        return self.coord.offset_fetch(req)

    # -- scenarios ------------------------------------------------------------------------

    def stable_group(
        self,
        n: int,
        *,
        group: str = "g",
        instances: list[str | None] | None = None,
        session: int = 10_000,
    ) -> tuple[list[str], int]:
        """n members joined and synced (the first is the leader): (member ids, generation)."""
        instances = instances or [None] * n
        parked = []
        for i in range(n):
            kw: dict[str, Any] = {"group": group, "client": f"c{i}", "session": session}
            r = self.join(instance=instances[i], **kw)
            if isinstance(r, JoinGroupReply):  # dynamic: MEMBER_ID_REQUIRED first
                assert r.error is E.member_id_required
                r = self.join(r.member_id, instance=instances[i], **kw)
            parked.append(r)
        while any(self.answer(p) is None for p in parked):
            self.advance(self.config.initial_rebalance_delay_ms)
        replies = [self.answer(p) for p in parked]
        assert all(isinstance(r, JoinGroupReply) and r.error is E.none for r in replies), replies
        ids = [r.member_id for r in replies]
        gen = replies[0].generation_id
        leader = replies[0].leader
        assignments = {m: f"assign-{m}".encode() for m in ids}
        synced = [self.sync(leader, gen, assignments, group=group)]
        synced += [self.sync(m, gen, group=group) for m in ids if m != leader]
        assert all(isinstance(s, SyncGroupReply) and s.error is E.none for s in synced), synced
        return ids, gen


def _topics(
    offsets: dict[tuple[str, int], int], metadata: str | None
) -> tuple[tuple[str, tuple[CommitPartition, ...]], ...]:
    topics: dict[str, list[CommitPartition]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(CommitPartition(p, o, 7, metadata))
    return tuple((t, tuple(ps)) for t, ps in topics.items())


def _flatten(reply: CommitReply) -> dict[tuple[str, int], ErrorCode]:
    return {(t, p): e for t, ps in reply.topics for p, e in ps}
