"""The group leader's assignment of connectors and tasks to workers: incremental
cooperative rebalancing (KIP-415, Kafka Connect's default since 2.3), as a pure
function of the members' reported assignments, the configured work and the clock.

One round takes what every member reports running and returns, per member, what
to start and what to stop, plus the assignor state for the next round:

- work no longer configured, or reported by two members at once, is revoked;
- new work goes to the least-loaded workers;
- when workers join with no load, the busiest workers give work back down to the
  new average (revoked now, reassigned in the follow-up rebalance the revocation
  triggers), so nothing ever runs on two members at once;
- work that a departed worker held ("lost") stays unassigned for up to
  ``scheduled.rebalance.max.delay.ms``, so a bounced worker can come back and take
  it again. When the delay expires it goes to the workers that joined empty in the
  meantime, or is spread like new work. Revocations for balance wait until no such
  delay is pending. If no worker left, lost work (a member that missed the previous
  assignment) is reassigned at once.

No I/O and no clock reads: ``now_ms`` is an input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.work import EMPTY, Work


@dataclass(frozen=True)
class MemberAssignment:
    """What the leader tells one member: start these, stop those, and the remaining
    delay before lost work is reassigned (0 when none is pending)."""

    start: Work = EMPTY
    stop: Work = EMPTY
    delay_ms: int = 0


@dataclass(frozen=True)
class AssignorState:
    """What the leader remembers between rounds."""

    previous: Work = EMPTY
    previous_generation: int = -1
    previous_members: frozenset[str] = frozenset()
    previous_revocation: Work = EMPTY
    scheduled_rebalance_ms: int = 0  # 0: no delayed reassignment pending
    delay_ms: int = 0
    candidates: frozenset[str] = frozenset()


@dataclass
class _Load:
    member: str
    connectors: set[str] = field(default_factory=set)
    tasks: set[ConnectorTaskId] = field(default_factory=set)

    def work(self) -> Work:
        return Work.of(self.connectors, self.tasks)

    def empty(self) -> bool:
        return not self.connectors and not self.tasks


def assign(
    state: AssignorState,
    members: Mapping[str, Work],
    configured: Work,
    *,
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    last_completed_generation: int,
) -> tuple[dict[str, MemberAssignment], AssignorState]:
    """One rebalance round. ``members`` maps each member id to the work it reports
    running; ``configured`` is everything the config topic holds."""
    previous = state.previous if state.previous_generation == last_completed_generation else EMPTY
    active = _union(members.values())
    if state.previous_revocation and state.previous_revocation & active:
        # A revocation did not take effect: start again from what members report.
        previous = active

    # Anything not configured any more is revoked from whoever runs it.
    deleted = (previous | active) - configured
    lost = previous - active - deleted
    new = configured - previous - active

    to_stop: dict[str, Work] = {m: reported & deleted for m, reported in members.items()}
    duplicated = _duplicated(members.values())
    for m, reported in members.items():
        to_stop[m] = to_stop[m] | (reported & duplicated)

    # Loads without deleted and duplicated work: what stays running.
    loads = {
        m: _Load(m, set(w.connectors), set(w.tasks))
        for m, w in ((m, members[m] - to_stop[m]) for m in members)
    }
    running = {m: load.work() for m, load in loads.items()}

    scheduled, delay, candidates = (
        state.scheduled_rebalance_ms,
        state.delay_ms,
        set(state.candidates),
    )
    if not lost:
        scheduled, delay, candidates = 0, 0, set()
    elif scheduled <= 0 and set(members) >= state.previous_members:
        # Nobody left: a member missed the last assignment. Reassign now.
        new = new | lost
    elif scheduled > 0 and now_ms >= scheduled:
        targets = [loads[m] for m in sorted(candidates) if m in loads]
        if targets:
            for i, connector in enumerate(sorted(lost.connectors)):
                targets[i % len(targets)].connectors.add(connector)
            for i, task in enumerate(sorted(lost.tasks)):
                targets[i % len(targets)].tasks.add(task)
        else:
            new = new | lost
        scheduled, delay, candidates = 0, 0, set()
    else:
        candidates |= {m for m, load in loads.items() if load.empty()}
        delay = min(scheduled - now_ms, max_delay_ms) if now_ms < scheduled else max_delay_ms
        scheduled = now_ms + delay

    if delay == 0:
        for m, revoked in _balance(configured, loads).items():
            to_stop[m] = to_stop[m] | revoked

    _spread(loads, new)

    assignments = {
        m: MemberAssignment(start=loads[m].work() - running[m], stop=to_stop[m], delay_ms=delay)
        for m in members
    }
    all_revoked = _union(to_stop.values())
    next_state = AssignorState(
        previous=(_union(load.work() for load in loads.values()) - all_revoked) | lost,
        previous_generation=generation,
        previous_members=frozenset(members),
        previous_revocation=all_revoked,
        scheduled_rebalance_ms=scheduled,
        delay_ms=delay,
        candidates=frozenset(candidates),
    )
    return assignments, next_state


def _union(works: Iterable[Work]) -> Work:
    out = EMPTY
    for w in works:
        out = out | w
    return out


def _duplicated(works: Iterable[Work]) -> Work:
    seen, dup = EMPTY, EMPTY
    for w in works:
        dup = dup | (seen & w)
        seen = seen | w
    return dup


def _balance(configured: Work, loads: Mapping[str, _Load]) -> dict[str, Work]:
    """When empty workers joined, take back from each loaded worker what it holds
    above the new ceiling average (connectors and tasks counted separately)."""
    loaded = [load for load in loads.values() if not load.empty()]
    if not loaded or len(loaded) == len(loads):
        return {}
    workers = len(loads)
    ceil_connectors = -(-len(configured.connectors) // workers)
    ceil_tasks = -(-len(configured.tasks) // workers)
    revoked: dict[str, Work] = {}
    for load in loaded:
        # Give back the highest-sorted items: deterministic, and a connector's low
        # task numbers tend to stay where they are.
        extra_connectors = (
            sorted(load.connectors)[ceil_connectors:]
            if len(load.connectors) > ceil_connectors
            else []
        )
        extra_tasks = sorted(load.tasks)[ceil_tasks:] if len(load.tasks) > ceil_tasks else []
        if extra_connectors or extra_tasks:
            revoked[load.member] = Work.of(extra_connectors, extra_tasks)
    return revoked


def _spread(loads: Mapping[str, _Load], new: Work) -> None:
    """Give each new connector, then each new task, to the least-loaded member."""
    if not loads:
        return
    for connector in sorted(new.connectors):
        min(loads.values(), key=lambda load: (len(load.connectors), load.member)).connectors.add(
            connector
        )
    for task in sorted(new.tasks):
        min(loads.values(), key=lambda load: (len(load.tasks), load.member)).tasks.add(task)
