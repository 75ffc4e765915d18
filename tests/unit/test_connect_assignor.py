"""Incremental cooperative assignment: exact outcomes of single rounds, and a simulated
group (members apply their assignments, join and leave) that must never run a task on
two members at once and must converge to each task exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.assignor import AssignorState, MemberAssignment, assign
from oncelog.connect.runtime.work import EMPTY, Work, configured_work

MAX_DELAY = 300_000


def T(connector: str, task: int) -> ConnectorTaskId:
    return ConnectorTaskId(connector, task)


@dataclass
class Group:
    """Members that apply what the leader sends, as workers do."""

    configured: Work
    running: dict[str, Work] = field(default_factory=dict)
    state: AssignorState = field(default_factory=AssignorState)
    generation: int = 0
    now: int = 1_000_000

    def rebalance(self) -> dict[str, MemberAssignment]:
        self.generation += 1
        result, self.state = assign(
            self.state,
            self.running,
            self.configured,
            now_ms=self.now,
            max_delay_ms=MAX_DELAY,
            generation=self.generation,
            last_completed_generation=self.generation - 1,
        )
        for member, a in result.items():
            assert not (a.start & self.running[member]), "starting work already running"
            self.running[member] = (self.running[member] - a.stop) | a.start
        self.check_no_duplicates()
        return result

    def check_no_duplicates(self) -> None:
        seen = EMPTY
        for work in self.running.values():
            assert not (seen & work), f"work on two members: {seen & work}"
            seen = seen | work

    def settle(self, rounds: int = 4) -> None:
        for _ in range(rounds):
            self.rebalance()

    def all_running(self) -> Work:
        out = EMPTY
        for work in self.running.values():
            out = out | work
        return out


def test_initial_assignment_is_balanced() -> None:
    group = Group(configured_work({"a": 3, "b": 2}), {"w1": EMPTY, "w2": EMPTY, "w3": EMPTY})
    result = group.rebalance()
    assert result == {
        "w1": MemberAssignment(start=Work.of(["a"], [T("a", 0), T("b", 0)])),
        "w2": MemberAssignment(start=Work.of(["b"], [T("a", 1), T("b", 1)])),
        "w3": MemberAssignment(start=Work.of([], [T("a", 2)])),
    }
    # A stable group changes nothing.
    assert group.rebalance() == {m: MemberAssignment() for m in ("w1", "w2", "w3")}


def test_new_worker_gets_work_after_a_revocation_round() -> None:
    group = Group(configured_work({"a": 6}), {"w1": EMPTY, "w2": EMPTY})
    group.rebalance()
    assert {m: len(w.tasks) for m, w in group.running.items()} == {"w1": 3, "w2": 3}
    group.running["w3"] = EMPTY
    first = group.rebalance()
    # Each old worker gives back one task (6 tasks / 3 workers = 2 each); nothing starts yet.
    assert first == {
        "w1": MemberAssignment(stop=Work.of([], [T("a", 4)])),
        "w2": MemberAssignment(stop=Work.of([], [T("a", 5)])),
        "w3": MemberAssignment(),
    }
    second = group.rebalance()
    assert second == {
        "w1": MemberAssignment(),
        "w2": MemberAssignment(),
        "w3": MemberAssignment(start=Work.of([], [T("a", 4), T("a", 5)])),
    }
    assert {m: len(w.tasks) for m, w in group.running.items()} == {"w1": 2, "w2": 2, "w3": 2}


def test_departed_worker_work_waits_for_the_delay() -> None:
    group = Group(configured_work({"a": 4}), {"w1": EMPTY, "w2": EMPTY})
    group.rebalance()
    gone = group.running.pop("w2")
    first = group.rebalance()
    assert first == {"w1": MemberAssignment(delay_ms=MAX_DELAY)}
    assert group.state.scheduled_rebalance_ms == group.now + MAX_DELAY
    group.now += 100_000
    assert group.rebalance() == {"w1": MemberAssignment(delay_ms=200_000)}
    group.now += 200_000  # the delay expired: the lost work is spread like new work
    result = group.rebalance()
    assert result["w1"].start == gone and result["w1"].delay_ms == 0
    assert group.all_running() == group.configured


def test_bounced_worker_gets_its_work_back() -> None:
    group = Group(configured_work({"a": 4, "b": 2}), {"w1": EMPTY, "w2": EMPTY, "w3": EMPTY})
    group.rebalance()
    lost = group.running.pop("w3")
    group.rebalance()
    group.now += 10_000
    group.running["w3-new"] = EMPTY  # the worker restarted with a new member id
    result = group.rebalance()
    assert result["w3-new"] == MemberAssignment(delay_ms=MAX_DELAY - 10_000)
    assert group.state.candidates == {"w3-new"}
    group.now += MAX_DELAY
    result = group.rebalance()
    assert result["w3-new"].start == lost
    assert result["w1"] == MemberAssignment() and result["w2"] == MemberAssignment()


def test_lost_work_without_departure_is_reassigned_at_once() -> None:
    group = Group(configured_work({"a": 2}), {"w1": EMPTY, "w2": EMPTY})
    group.rebalance()
    assert group.running["w2"] == Work.of([], [T("a", 1)])
    group.running["w2"] = EMPTY  # w2 missed its assignment but did not leave
    assert group.rebalance() == {
        "w1": MemberAssignment(),
        "w2": MemberAssignment(start=Work.of([], [T("a", 1)])),
    }


def test_deleted_and_duplicated_work_is_revoked() -> None:
    group = Group(configured_work({"a": 2, "b": 1}), {"w1": EMPTY, "w2": EMPTY})
    group.rebalance()
    assert group.running == {
        "w1": Work.of(["a"], [T("a", 0), T("b", 0)]),
        "w2": Work.of(["b"], [T("a", 1)]),
    }
    group.configured = configured_work({"a": 2})
    assert group.rebalance() == {
        "w1": MemberAssignment(stop=Work.of([], [T("b", 0)])),
        "w2": MemberAssignment(stop=Work.of(["b"], [])),
    }
    assert group.all_running() == group.configured
    # A task reported by two members (a split brain) is stopped on both, then placed once.
    group.running["w1"] = group.running["w1"] | Work.of([], [T("a", 1)])
    group.check_no_duplicates = lambda: None  # type: ignore[method-assign]
    result = group.rebalance()
    assert result == {
        "w1": MemberAssignment(stop=Work.of([], [T("a", 1)])),
        "w2": MemberAssignment(stop=Work.of([], [T("a", 1)])),
    }
    assert group.rebalance() == {
        "w1": MemberAssignment(),
        "w2": MemberAssignment(start=Work.of([], [T("a", 1)])),
    }


def test_generation_mismatch_forgets_the_previous_assignment() -> None:
    group = Group(configured_work({"a": 2}), {"w1": EMPTY})
    group.rebalance()
    # The leader's last sync failed: previous is ignored, nothing is considered lost.
    result, state = assign(group.state, {"w1": EMPTY}, group.configured, now_ms=group.now, max_delay_ms=MAX_DELAY,
                           generation=10, last_completed_generation=9)  # fmt: skip
    assert result["w1"].start == group.configured and result["w1"].delay_ms == 0
    assert state.previous == group.configured


@settings(max_examples=60, deadline=None)
@given(
    tasks=st.dictionaries(st.sampled_from("abcd"), st.integers(0, 5), min_size=1),
    events=st.lists(
        st.tuples(st.sampled_from(["join", "leave", "reconfigure", "time"]), st.integers(0, 10)),
        max_size=12,
    ),
)
def test_simulated_group_never_duplicates_and_converges(
    tasks: dict[str, int], events: list[tuple[str, int]]
) -> None:
    group = Group(configured_work(tasks), {"w0": EMPTY})
    next_id = 1
    for event, n in events:
        if event == "join":
            group.running[f"w{next_id}"] = EMPTY
            next_id += 1
        elif event == "leave" and len(group.running) > 1:
            group.running.pop(sorted(group.running)[n % len(group.running)])
        elif event == "reconfigure":
            tasks = {**tasks, "abcd"[n % 4]: n % 4}
            group.configured = configured_work(tasks)
        else:
            group.now += n * 60_000
        group.rebalance()
    group.now += MAX_DELAY + 1
    group.settle()
    running = group.all_running()
    assert running == group.configured
    assert sum(len(w) for w in group.running.values()) == len(group.configured)


def test_eager_assignment_deals_connectors_then_tasks_round_robin() -> None:
    from oncelog.connect.distributed.eager_assignor import eager_assign

    configured = Work.of(
        ["a", "b"], [ConnectorTaskId("a", 0), ConnectorTaskId("a", 1), ConnectorTaskId("b", 0)]
    )
    # Kafka's EagerAssignor: members sorted by id; connectors first, then the tasks,
    # continuing around the same circle.
    assert eager_assign(["w2", "w1"], configured) == {
        "w1": Work.of(["a"], [ConnectorTaskId("a", 0), ConnectorTaskId("b", 0)]),
        "w2": Work.of(["b"], [ConnectorTaskId("a", 1)]),
    }
    assert eager_assign(["w1", "w2", "w3"], Work.of(["a"], [ConnectorTaskId("a", 0)])) == {
        "w1": Work.of(["a"]),
        "w2": Work.of([], [ConnectorTaskId("a", 0)]),
        "w3": Work.of(),
    }
