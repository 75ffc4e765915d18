"""A Jepsen-style checker of transactional histories (after Jepsen's Kafka workload).

Writers run transactions that each send a few unique values and then commit or abort;
consumers poll under read_committed; at the end one complete read_committed read of every
partition is taken. :func:`check` finds, from those records alone:

- ``aborted-read`` (G1a): a poll returned a value of an aborted transaction;
- ``lost-write``: a committed value is missing from the final read;
- ``torn-transaction``: a transaction whose outcome the writer does not know (its client
  failed mid-way) is partly visible;
- ``duplicate``: one value at two offsets;
- ``inconsistent-offset``: one offset read with two values, or at another offset than the
  producer was told;
- ``nonmonotonic-poll`` / ``poll-skip``: within one consumer session on a partition (from an
  assignment to the next), offsets went backwards, or jumped over an offset that the final
  read shows holding a value;
- ``precommitted-read``: a value polled before its writer asked to commit;
- ``write-order``: one writer's committed values of a partition are not in the order it
  sent them.

Jepsen's G0/G1c cycle search over write-read dependency graphs is not done here.
Timestamps are ``time.monotonic()`` of one machine (comparable across its processes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum


class Outcome(Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"  # the client failed before it learnt the outcome


@dataclass
class Txn:
    """One writer transaction: the values it sent as (partition, value, offset or None)
    in sending order, when commit was asked for, and its outcome."""

    writer: str
    number: int
    sends: list[tuple[int, bytes, int | None]] = field(default_factory=list)
    commit_asked_at: float | None = None
    outcome: Outcome = Outcome.UNKNOWN


@dataclass(frozen=True, slots=True)
class Poll:
    """One record a consumer polled; ``session`` changes with each new assignment of the
    partition to that consumer."""

    consumer: str
    session: int
    partition: int
    offset: int
    value: bytes
    at: float


def check(
    txns: Iterable[Txn],
    polls: Sequence[Poll],
    final: Mapping[int, Sequence[tuple[int, bytes]]],
) -> dict[str, list[str]]:
    """Anomalies found, by kind (only kinds with findings); ``final`` is the complete
    read_committed read: per partition, (offset, value) in offset order."""
    found: dict[str, list[str]] = defaultdict(list)
    txns = list(txns)
    writes: dict[bytes, Txn] = {}
    for t in txns:
        for _, value, _ in t.sends:
            writes[value] = t

    # One offset, one value; one value, one offset (final read and every poll together).
    at_offset: dict[tuple[int, int], bytes] = {}
    offsets_of: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    observed = [(p, o, v) for p, records in final.items() for o, v in records]
    observed += [(x.partition, x.offset, x.value) for x in polls]
    for partition, offset, value in observed:
        seen = at_offset.setdefault((partition, offset), value)
        if seen != value:
            found["inconsistent-offset"].append(f"{partition}@{offset}: {seen!r} and {value!r}")
        offsets_of[value].add((partition, offset))
    for t in txns:
        for partition, value, acked in t.sends:
            if acked is not None and offsets_of.get(value, {(partition, acked)}) != {
                (partition, acked)
            }:
                found["inconsistent-offset"].append(
                    f"{value!r} acknowledged at {partition}@{acked}, read at "
                    f"{sorted(offsets_of[value])}"
                )
    for value, places in offsets_of.items():
        if len(places) > 1:
            found["duplicate"].append(f"{value!r} at {sorted(places)}")

    visible = {v for records in final.values() for _, v in records}
    for value in visible - writes.keys():
        found["unknown-value"].append(f"{value!r} was never written")
    for t in txns:
        values = [v for _, v, _ in t.sends]
        shown = [v for v in values if v in visible]
        if t.outcome is Outcome.COMMITTED and len(shown) < len(values):
            missing = [v for v in values if v not in visible]
            found["lost-write"].append(f"{t.writer}#{t.number}: {missing!r}")
        elif t.outcome is Outcome.ABORTED and shown:
            found["aborted-read"].append(f"{t.writer}#{t.number} in the final read: {shown!r}")
        elif t.outcome is Outcome.UNKNOWN and 0 < len(shown) < len(values):
            found["torn-transaction"].append(f"{t.writer}#{t.number}: only {shown!r}")

    for x in polls:
        w = writes.get(x.value)
        if w is None:
            continue
        if w.outcome is Outcome.ABORTED:
            found["aborted-read"].append(f"{x.consumer} polled {x.value!r} ({w.writer}#{w.number})")
        if w.commit_asked_at is None or x.at < w.commit_asked_at:
            found["precommitted-read"].append(
                f"{x.consumer} polled {x.value!r} before {w.writer}#{w.number} asked to commit"
            )

    _check_sessions(polls, final, found)
    _check_write_order(txns, final, found)
    return dict(found)


def _check_sessions(
    polls: Sequence[Poll],
    final: Mapping[int, Sequence[tuple[int, bytes]]],
    found: dict[str, list[str]],
) -> None:
    # The position of each offset in the final read: consecutive polls of one session must
    # be consecutive there (control records and aborted data have no position).
    rank = {(p, o): i for p, records in final.items() for i, (o, _) in enumerate(records)}
    sessions: dict[tuple[str, int, int], list[Poll]] = defaultdict(list)
    for x in polls:
        sessions[(x.consumer, x.session, x.partition)].append(x)
    for (consumer, session, partition), seq in sessions.items():
        for a, b in zip(seq, seq[1:], strict=False):
            where = f"{consumer} session {session} on {partition}"
            if b.offset <= a.offset:
                found["nonmonotonic-poll"].append(f"{where}: {a.offset} then {b.offset}")
            elif (partition, a.offset) in rank and (partition, b.offset) in rank:
                skipped = rank[(partition, b.offset)] - rank[(partition, a.offset)] - 1
                if skipped > 0:
                    found["poll-skip"].append(
                        f"{where}: {a.offset} then {b.offset}, skipping {skipped} record(s)"
                    )


def _check_write_order(
    txns: Sequence[Txn],
    final: Mapping[int, Sequence[tuple[int, bytes]]],
    found: dict[str, list[str]],
) -> None:
    where = {v: (p, o) for p, records in final.items() for o, v in records}
    sent: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    for t in sorted(txns, key=lambda t: (t.writer, t.number)):
        if t.outcome is Outcome.COMMITTED:
            for partition, value, _ in t.sends:
                if value in where:
                    sent[(t.writer, partition)].append(value)
    for (writer, partition), values in sent.items():
        offsets = [where[v][1] for v in values]
        if offsets != sorted(offsets):
            found["write-order"].append(f"{writer} on {partition}: offsets {offsets}")
