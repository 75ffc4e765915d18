"""InitProducerId's pure decision (txn/init_producer_id.py): request checks, fencing and
the identity granted, case by case as Kafka's TransactionCoordinator decides them."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode as E

from oncelog.txn.init_producer_id import InitRequest, check_request, granted_identity, is_fenced
from oncelog.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TWO_PC_TIMEOUT_MS,
    TransactionMetadata,
)

MAX_TIMEOUT = 900_000


def check(req: InitRequest, two_pc: bool = True) -> tuple[E, int]:
    return check_request(req, two_phase_commit_enable=two_pc, max_timeout_ms=MAX_TIMEOUT)


@pytest.mark.parametrize(
    ("req", "two_pc", "expected"),
    [
        (InitRequest(60_000), True, (E.none, 60_000)),
        (InitRequest(0), True, (E.invalid_transaction_timeout, 0)),
        (InitRequest(MAX_TIMEOUT + 1), True, (E.invalid_transaction_timeout, 0)),
        (InitRequest(MAX_TIMEOUT), True, (E.none, MAX_TIMEOUT)),
        # 2PC ignores the request's timeout, and is refused like a missing ACL when off.
        (InitRequest(0, enable_2pc=True), True, (E.none, TWO_PC_TIMEOUT_MS)),
        (InitRequest(60_000, enable_2pc=True), False, (E.transactional_id_authorization_failed, 0)),
        (InitRequest(60_000, keep_prepared_txn=True), True, (E.invalid_request, 0)),
        (
            InitRequest(60_000, 7, 3, enable_2pc=True, keep_prepared_txn=True),
            True,
            (E.invalid_request, 0),
        ),
        # An expected identity is a producer id and an epoch, or neither.
        (InitRequest(60_000, 7, NO_PRODUCER_EPOCH), True, (E.invalid_request, 0)),
        (InitRequest(60_000, 7, 3), True, (E.none, 60_000)),
    ],
)
def test_request_checks(req: InitRequest, two_pc: bool, expected: tuple[E, int]) -> None:
    assert check(req, two_pc) == expected


def meta(pid: int = 7, epoch: int = 3, **kw: int) -> TransactionMetadata:
    return TransactionMetadata("t", pid, producer_epoch=epoch, **kw)


def test_fencing() -> None:
    assert not is_fenced(meta(), None)  # a fresh start is never fenced: it bumps
    assert not is_fenced(meta(), (7, 0))  # same producer id: the epoch rule decides
    assert is_fenced(meta(), (8, 3))
    assert not is_fenced(meta(epoch=NO_PRODUCER_EPOCH), (8, 3))  # no producer yet
    # A retry after a rotation whose reply was lost names the old id at the last epochs.
    rotated = meta(pid=9, epoch=0, last_producer_id=7)
    assert not is_fenced(rotated, (7, MAX_EPOCH - 1))
    assert is_fenced(rotated, (7, MAX_EPOCH - 3))
    # The producer that kept a prepared 2PC transaction under a rotated producer id.
    kept = meta(pid=7, epoch=5, next_producer_id=11, next_producer_epoch=0)
    assert not is_fenced(kept, (11, 0))


def allocator(start: int = 100):
    counter = itertools.count(start)
    return lambda: next(counter)


def test_granted_identity() -> None:
    # No expected identity: the next epoch, no last epoch.
    assert granted_identity(meta(), None, allocator()) == (7, 4, NO_PRODUCER_EPOCH)
    # The current identity (KIP-360): bumped, remembering the epoch it replaces.
    assert granted_identity(meta(), (7, 3), allocator()) == (7, 4, 3)
    # A retry whose reply was lost: the same epoch again.
    assert granted_identity(meta(epoch=4, last_producer_epoch=3), (7, 3), allocator()) == (7, 4, 3)
    # An older epoch that is neither: fenced.
    assert granted_identity(meta(epoch=4, last_producer_epoch=3), (7, 1), allocator()) is None
    # Exhausted epochs: a new producer id at epoch 0.
    assert granted_identity(meta(epoch=MAX_EPOCH - 1), None, allocator()) == (
        100,
        0,
        NO_PRODUCER_EPOCH,
    )
    assert granted_identity(meta(epoch=MAX_EPOCH - 1), (7, MAX_EPOCH - 1), allocator()) == (
        100,
        0,
        MAX_EPOCH - 1,
    )
