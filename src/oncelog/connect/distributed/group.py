"""This worker's place in its Connect group: the last assignment and the join/sync round
that replaces it (Kafka's ``WorkerCoordinator`` and the assignment bookkeeping of
``DistributedHerder``).

A round: JoinGroup with this worker's state (URL, config offset, what it owns); the
leader reads the config topic to its end and computes every member's assignment; then
SyncGroup. The member reads the config topic at least to the assignment's offset
(giving up after ``worker.sync.timeout.ms``) and then to its end, lets the caller stop
what was revoked, and takes the rest. A revocation calls for a follow-up round; a delay
in the assignment schedules one.

Under the eager protocol (configured, or chosen by the group because a member offers
nothing else) a worker stops everything it runs before it joins, and the assignment is
its whole share (Kafka's ``WorkerCoordinator.onJoinPrepare``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from oncelog.connect.distributed.assignor import AssignorState
from oncelog.connect.distributed.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    ConnectProtocolVersion,
    WorkerState,
    decode_assignment,
    join_protocols,
)
from oncelog.connect.distributed.group_assignment import leader_assignments
from oncelog.connect.distributed.membership import (
    COORDINATOR_ERRORS,
    REJOIN_ERRORS,
    ConnectGroupMember,
    MembershipError,
)
from oncelog.connect.distributed.requests import GroupView
from oncelog.connect.runtime.work import EMPTY, Work, configured_work
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)
from oncelog.connect.storage.config_store import ConfigStore

log = logging.getLogger(__name__)


class WorkerGroup:
    def __init__(
        self,
        member: ConnectGroupMember,
        protocol: ConnectProtocolVersion,
        url: str,
        config: WorkerConfig,
        configs: ConfigStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.member = member
        self.protocol = protocol
        self.current_protocol = protocol  # the one the group chose in the last round
        self.url = url
        self.config = config
        self.configs = configs
        self.clock = clock
        self.owned: Work = EMPTY
        self.leader_id: str | None = None
        self.leader_url: str | None = None
        self.rebalancing = True  # a round is under way, or the last one failed
        self.need_rejoin = True  # a round is due
        self.rejoin_at: float | None = None
        self.last_generation = -1
        self.assignor = AssignorState()
        self.configured_at_assignment: Work = EMPTY

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.member.member_id

    def view(self) -> GroupView:
        return GroupView(
            rebalancing=self.rebalancing,
            rebalance_due=self.need_rejoin,
            leader_url=self.leader_url,
            is_leader=self.is_leader,
        )

    def check_schedule(self) -> None:
        """A delayed follow-up round whose time has come is due now."""
        if self.rejoin_at is not None and time.monotonic() >= self.rejoin_at:
            self.rejoin_at = None
            self.need_rejoin = True

    def configuration_changed(self) -> bool:
        """The configured connectors or task counts differ from the last assignment's."""
        return (
            configured_work(self.configs.snapshot().task_counts_by_connector())
            != self.configured_at_assignment
        )

    def rebalance(self, stop_revoked: Callable[[Work], None]) -> bool:
        """One round; True once a new assignment is taken (False: another round is due)."""
        self.rebalancing = True
        if self.current_protocol is ConnectProtocolVersion.EAGER and self.owned:
            stop_revoked(self.owned)
            self.owned = EMPTY
        log.info("joining the group (generation %d)", self.member.generation)
        snapshot = self.configs.snapshot()
        current = ConnectAssignment(
            int(self.protocol), 0, self.leader_id or "", self.leader_url or "",
            snapshot.offset, self.owned,
        )  # fmt: skip
        result = self.member.join(
            join_protocols(WorkerState(self.url, snapshot.offset, current), self.protocol)
        )
        self.current_protocol = ConnectProtocolVersion.from_name(result.protocol)
        assignments: dict[str, bytes] | None = None
        if result.is_leader:
            self.configs.read_to_end()
            snapshot = self.configs.snapshot()
            assignments, self.assignor = leader_assignments(
                self.current_protocol,
                result.leader_id,
                result.members,
                snapshot.offset,
                configured_work(snapshot.task_counts_by_connector()),
                self.assignor,
                now_ms=int(self.clock() * 1000),
                max_delay_ms=self.config.settings.scheduled_rebalance_max_delay_ms,
                generation=result.generation,
                last_completed_generation=self.last_generation,
            )
        try:
            raw_assignment = self.member.sync(assignments)
        except MembershipError as exc:
            if exc.code not in REJOIN_ERRORS and exc.code not in COORDINATOR_ERRORS:
                raise
            # Another member joined (or the generation moved on) between our join and
            # sync: join again at once, as Kafka's coordinator does. Treating it as a
            # failed tick would wait out worker.unsync.backoff.ms (5 minutes).
            log.info("SyncGroup: %s; joining again", exc.code.name)
            self.need_rejoin = True
            return False
        assignment = decode_assignment(raw_assignment)
        log.info(
            "generation %d: assigned %s, revoked %s, delay %d ms, config offset %d",
            result.generation,
            sorted(map(str, assignment.assigned.tasks)),
            sorted(map(str, assignment.revoked.tasks)),
            assignment.delay_ms,
            assignment.config_offset,
        )
        self.leader_id, self.leader_url = assignment.leader, assignment.leader_url
        self.need_rejoin = False
        if assignment.error == CONFIG_MISMATCH:
            self.configs.read_to_end()
            self.need_rejoin = True
            return False
        deadline = time.monotonic() + self.config.settings.worker_sync_timeout_ms / 1000
        while self.configs.snapshot().offset < assignment.config_offset:
            if time.monotonic() > deadline:
                self.need_rejoin = True  # could not catch up: leave the work, rejoin
                return False
            self.configs.poll(0.2)
        self.configs.read_to_end()
        stop_revoked(assignment.revoked)
        self.owned = (self.owned - assignment.revoked) | assignment.assigned
        self.last_generation = result.generation
        self.configured_at_assignment = configured_work(
            self.configs.snapshot().task_counts_by_connector()
        )
        if assignment.revoked:
            self.need_rejoin = True  # the follow-up round hands out what was revoked
        if assignment.delay_ms > 0:
            self.rejoin_at = time.monotonic() + assignment.delay_ms / 1000
        self.rebalancing = False
        log.info(
            "joined generation %d as %s (leader %s): owns %d connectors, %d tasks",
            result.generation,
            "leader" if self.is_leader else "follower",
            self.leader_url,
            len(self.owned.connectors),
            len(self.owned.tasks),
        )
        return True
