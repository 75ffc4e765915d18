"""Connect workers' group membership against a real oncelog broker: join with protocol
type ``connect``, leader election, assignment through SyncGroup, rebalance on leave,
and protocol negotiation with an eager worker."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from kio.schema.errors import ErrorCode

from oncelog.connect.distributed.assignor import AssignorState, assign
from oncelog.connect.distributed.connect_protocol import (
    NO_ERROR,
    ConnectAssignment,
    ConnectProtocolVersion,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    join_protocols,
)
from oncelog.connect.distributed.membership import ConnectGroupMember, JoinResult
from oncelog.connect.runtime.work import Work, configured_work
from oncelog.embedded import EmbeddedBroker

MAX_DELAY = 60_000


class Worker:
    def __init__(
        self, broker: EmbeddedBroker, group: str, url: str, protocol: ConnectProtocolVersion
    ) -> None:
        self.member = ConnectGroupMember(
            broker.bootstrap, group, session_timeout_ms=6000, rebalance_timeout_ms=5000
        )
        self.url = url
        self.protocol = protocol
        self.current: ConnectAssignment | None = None
        self.running = Work()

    def join(self) -> JoinResult:
        return self.member.join(
            join_protocols(WorkerState(self.url, 0, self.current), self.protocol)
        )


def _round(
    workers: list[Worker], state: AssignorState, configured: Work
) -> tuple[AssignorState, dict[str, JoinResult]]:
    with ThreadPoolExecutor(len(workers)) as pool:
        results = list(pool.map(lambda w: w.join(), workers))
    leaders = [r for r in results if r.is_leader]
    assert len(leaders) == 1
    leader = leaders[0]
    urls = {member_id: decode_metadata(metadata)[1].url for member_id, metadata in leader.members}
    # Each member reports what it runs (its metadata carries its last assignment; the
    # simulated workers track what they run after applying start/stop).
    reported = {m: next(w.running for w in workers if w.url == urls[m]) for m in urls}
    assignments, state = assign(state, reported, configured, now_ms=int(time.time() * 1000), max_delay_ms=MAX_DELAY,
                                generation=leader.generation, last_completed_generation=leader.generation - 1)  # fmt: skip
    version = ConnectProtocolVersion.from_name(leader.protocol)
    leader_url = urls[leader.member_id]
    encoded = {
        m: encode_assignment(
            ConnectAssignment(
                int(version), NO_ERROR, leader.member_id, leader_url, 0, a.start, a.stop, a.delay_ms
            )
        )  # fmt: skip
        for m, a in assignments.items()
    }
    by_member = {r.member_id: w for r, w in zip(results, workers, strict=True)}

    def sync(member_id: str) -> None:
        worker = by_member[member_id]
        data = worker.member.sync(encoded if member_id == leader.member_id else None)
        worker.current = decode_assignment(data)
        worker.running = (worker.running - worker.current.revoked) | worker.current.assigned

    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(sync, by_member))
    return state, {r.member_id: r for r in results}


def test_three_workers_share_the_work_and_rebalance_on_leave(broker: EmbeddedBroker) -> None:
    configured = configured_work({"source": 3, "sink": 2})
    workers = [
        Worker(broker, "connect-cluster", f"http://w{i}:8083/", ConnectProtocolVersion.SESSIONED)
        for i in range(3)
    ]
    try:
        state, results = _round(workers, AssignorState(), configured)
        assert {r.protocol for r in results.values()} == {"sessioned"}
        assert len({r.generation for r in results.values()}) == 1
        running = [w.running for w in workers]
        assert sorted(len(r.tasks) for r in running) == [1, 2, 2]
        union = Work()
        for r in running:
            assert not (union & r)
            union = union | r
        assert union == configured
        leader_id = next(m for m, r in results.items() if r.is_leader)
        leader_worker = next(w for w in workers if w.member.member_id == leader_id)
        assert {(w.current.leader, w.current.leader_url) for w in workers if w.current} == {
            (leader_id, leader_worker.url)
        }
        for w in workers:
            assert w.member.heartbeat() == ErrorCode.none

        departed = workers.pop()
        gone = departed.running
        departed.member.leave()
        departed.member.close()
        # The others learn of the rebalance from their heartbeats.
        deadline = time.monotonic() + 10
        codes = set()
        while time.monotonic() < deadline:
            codes = {w.member.heartbeat() for w in workers}
            if codes == {ErrorCode.rebalance_in_progress}:
                break
            time.sleep(0.2)
        assert codes == {ErrorCode.rebalance_in_progress}
        state, results = _round(workers, state, configured)
        # The departed worker's work waits for scheduled.rebalance.max.delay.ms.
        assert all(w.current and w.current.delay_ms > 0 for w in workers)
        assert all(not (w.running & gone) for w in workers)
        assert state.scheduled_rebalance_ms > 0
    finally:
        for w in workers:
            w.member.leave()
            w.member.close()


def test_an_eager_worker_makes_the_group_use_the_default_protocol(broker: EmbeddedBroker) -> None:
    workers = [
        Worker(broker, "mixed", "http://a:1/", ConnectProtocolVersion.SESSIONED),
        Worker(broker, "mixed", "http://b:1/", ConnectProtocolVersion.EAGER),
    ]
    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda w: w.join(), workers))
        assert {r.protocol for r in results} == {"default"}
        leader = next(r for r in results if r.is_leader)
        versions = sorted(decode_metadata(m)[0] for _, m in leader.members)
        assert versions == [0, 0]  # every member's metadata for the chosen protocol
    finally:
        for w in workers:
            w.member.close()
