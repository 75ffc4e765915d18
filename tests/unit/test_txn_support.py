"""Shared helpers for the transaction coordinator tests: a step's side effects as one list."""

from __future__ import annotations

from oncelog.coordinator.runtime import Append
from oncelog.txn.messages import TxnStep, WriteMarkers

Action = Append | WriteMarkers


def acts(step: TxnStep) -> list[Action]:
    """The step's side effects in the order a shell performs them: appends, then markers
    (a retried append, made again after a back-off, counts as an append)."""
    out: list[Action] = [*step.appends, *step.retry]
    for effect in step.effects:
        assert isinstance(effect, WriteMarkers)
        out.append(effect)
    return out


def owner(a: Action) -> str:
    """The transactional id an append or marker write belongs to."""
    return a.owner if isinstance(a, Append) else a.transactional_id


def key(a: Action) -> bytes:
    assert isinstance(a, Append) and len(a.records) == 1
    return a.records[0][0]


def value(a: Action) -> bytes | None:
    assert isinstance(a, Append) and len(a.records) == 1
    return a.records[0][1]
