"""Server-side assignors (KIP-848): every subscribed partition goes to exactly one
subscriber; uniform balances identical subscriptions within one partition and is sticky."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.group.assignors import AssignorInput, range_assignor, uniform

TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(4)]


@st.composite
def specs(draw: st.DrawFn, identical: bool) -> AssignorInput:
    counts = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    topics = {TOPIC_IDS[i]: n for i, n in enumerate(counts)}
    members = draw(st.lists(st.text("abcdef", min_size=1, max_size=3), min_size=1, unique=True))
    every = frozenset(topics)
    subs = {
        m: every
        if identical
        else frozenset(draw(st.sets(st.sampled_from(sorted(topics, key=str)))))
        for m in members
    }
    previous = {
        m: {
            t: frozenset(draw(st.sets(st.integers(0, 14), max_size=4)))
            for t in draw(st.sets(st.sampled_from(sorted(topics, key=str)), max_size=2))
        }
        for m in draw(st.sets(st.sampled_from(members)))
    }
    return AssignorInput(subs, topics, previous)


def check_exactly_once(spec: AssignorInput, result: dict[str, dict[uuid.UUID, frozenset[int]]]):
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member, topics in result.items():
        for t, ps in topics.items():
            assert t in spec.subscriptions[member]
            for p in ps:
                assert (t, p) not in seen
                seen[(t, p)] = member
    subscribed = {t for ts in spec.subscriptions.values() for t in ts}
    expected = {(t, p) for t in subscribed for p in range(spec.partitions[t])}
    assert set(seen) == expected


@settings(max_examples=300, deadline=None)
@given(specs(identical=False))
def test_uniform_assigns_each_subscribed_partition_once(spec: AssignorInput) -> None:
    check_exactly_once(spec, uniform(spec))


@settings(max_examples=300, deadline=None)
@given(specs(identical=False))
def test_range_assigns_each_subscribed_partition_once(spec: AssignorInput) -> None:
    check_exactly_once(spec, range_assignor(spec))


@settings(max_examples=300, deadline=None)
@given(specs(identical=True))
def test_uniform_balances_identical_subscriptions_within_one(spec: AssignorInput) -> None:
    result = uniform(spec)
    loads = [sum(len(ps) for ps in result[m].values()) for m in spec.subscriptions]
    assert max(loads) - min(loads) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    t = TOPIC_IDS[0]
    first = uniform(AssignorInput({"a": frozenset({t})}, {t: 6}, {}))
    assert first == {"a": {t: frozenset(range(6))}}
    second = uniform(AssignorInput({"a": frozenset({t}), "b": frozenset({t})}, {t: 6}, first))
    assert second == {"a": {t: frozenset({0, 1, 2})}, "b": {t: frozenset({3, 4, 5})}}
    third = uniform(
        AssignorInput(
            {m: frozenset({t}) for m in ("a", "b", "c")},
            {t: 6},
            second,
        )
    )
    # a and b each give up one partition; nobody else moves.
    assert third["a"][t] <= second["a"][t] and third["b"][t] <= second["b"][t]
    assert len(third["c"][t]) == 2


def test_range_gives_contiguous_ranges_per_topic() -> None:
    t1, t2 = TOPIC_IDS[:2]
    both = frozenset({t1, t2})
    result = range_assignor(AssignorInput({"b": both, "a": both}, {t1: 5, t2: 2}, {}))
    assert result == {
        "a": {t1: frozenset({0, 1, 2}), t2: frozenset({0})},
        "b": {t1: frozenset({3, 4}), t2: frozenset({1})},
    }
