"""Server-side partition assignors of the consumer group protocol (KIP-848).

Pure functions of the members' subscriptions, the subscribed topics' partition counts and
the previous target assignment. ``uniform`` (the default) spreads all partitions evenly and
keeps a member's partitions where balance allows, so a rebalance moves few partitions;
``range`` gives each member a contiguous range of every topic it subscribes to, so members
with the same subscriptions get co-partitioned ranges across topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicId = uuid.UUID
# member id -> topic id -> partitions
Assignment = dict[str, dict[TopicId, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class AssignorInput:
    subscriptions: Mapping[str, frozenset[TopicId]]  # member id -> subscribed topics that exist
    partitions: Mapping[TopicId, int]  # topic id -> partition count
    previous: Mapping[str, Mapping[TopicId, frozenset[int]]]  # last target assignment


def uniform(spec: AssignorInput) -> Assignment:
    """Every subscribed partition to exactly one subscriber. With identical subscriptions
    member loads differ by at most one. Sticky: a member keeps previous partitions up to
    its quota."""
    members = sorted(spec.subscriptions)
    load: dict[str, int] = {m: 0 for m in members}
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
    unassigned: list[tuple[TopicId, int]] = []
    all_tps = [
        (t, p)
        for t in sorted(spec.partitions, key=str)
        if any(t in spec.subscriptions[m] for m in members)
        for p in range(spec.partitions[t])
    ]
    # Quota per member if everyone could take anything: floor/ceil of total / members.
    quota = _quotas(len(all_tps), members)
    owner: dict[tuple[TopicId, int], str] = {}
    for m in members:
        for t, parts in spec.previous.get(m, {}).items():
            if t not in spec.subscriptions[m] or t not in spec.partitions:
                continue
            for p in sorted(parts):
                if p < spec.partitions[t] and (t, p) not in owner:
                    owner[(t, p)] = m
    for tp in all_tps:
        m_prev = owner.get(tp)
        if m_prev is not None and load[m_prev] < quota[m_prev]:
            result[m_prev].setdefault(tp[0], set()).add(tp[1])
            load[m_prev] += 1
        else:
            unassigned.append(tp)
    for t, p in unassigned:
        eligible = [m for m in members if t in spec.subscriptions[m]]
        best = min(eligible, key=lambda m: (load[m], members.index(m)))
        result[best].setdefault(t, set()).add(p)
        load[best] += 1
    return _freeze(result)


def _quotas(total: int, members: list[str]) -> dict[str, int]:
    if not members:
        return {}
    base, extra = divmod(total, len(members))
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}


def range_assignor(spec: AssignorInput) -> Assignment:
    """Per topic, subscribers sorted by member id take consecutive ranges; the first
    ``partitions % subscribers`` members get one more."""
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in spec.subscriptions}
    for t, count in spec.partitions.items():
        subs = sorted(m for m, topics in spec.subscriptions.items() if t in topics)
        if not subs:
            continue
        base, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = base + (1 if i < extra else 0)
            if n:
                result[m][t] = set(range(start, start + n))
            start += n
    return _freeze(result)


def _freeze(result: dict[str, dict[TopicId, set[int]]]) -> Assignment:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in result.items()}


ASSIGNORS: dict[str, Callable[[AssignorInput], Assignment]] = {
    "uniform": uniform,
    "range": range_assignor,
}
DEFAULT_ASSIGNOR = "uniform"
