"""InitProducerId's decision: is the request valid, is its caller fenced, and which
producer id and epoch it gets (KIP-98; KIP-360 retries and epoch bumps with an expected
identity; KIP-939 two-phase commit). Pure functions of the request and the transaction's
metadata; ``TransactionCoordinator.init_producer_id`` turns the decision into a
transition (or into an abort of the open transaction, or keeps a prepared one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.txn.messages import Reply
from oncelog.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TWO_PC_TIMEOUT_MS,
    TransactionMetadata,
    TxnState,
)

E = ErrorCode


@dataclass(frozen=True, slots=True)
class InitRequest:
    timeout_ms: int
    producer_id: int = NO_PRODUCER_ID  # the caller's current identity (KIP-360), if any
    producer_epoch: int = NO_PRODUCER_EPOCH
    enable_2pc: bool = False
    keep_prepared_txn: bool = False

    @property
    def expected(self) -> tuple[int, int] | None:
        if self.producer_id == NO_PRODUCER_ID:
            return None
        return self.producer_id, self.producer_epoch


def check_request(
    req: InitRequest, *, two_phase_commit_enable: bool, max_timeout_ms: int
) -> tuple[ErrorCode, int]:
    """The request's own validity, before any state is looked at: ``(E.none, timeout)``
    with the transaction timeout to use, or the error to answer."""
    if req.enable_2pc and not two_phase_commit_enable:
        # Kafka answers as it does to a missing ACL, so the setting cannot be probed.
        return E.transactional_id_authorization_failed, 0
    if req.keep_prepared_txn and not req.enable_2pc:
        return E.invalid_request, 0  # only a 2PC transaction is kept
    if req.keep_prepared_txn and req.producer_id != NO_PRODUCER_ID:
        # As Kafka's coordinator: keepPreparedTxn is a restarted producer's first call,
        # an expected producer id and epoch a retry's; never both.
        return E.invalid_request, 0
    timeout_ms = req.timeout_ms
    if req.enable_2pc:
        timeout_ms = TWO_PC_TIMEOUT_MS  # the request's timeout is ignored, as in Kafka
    elif timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        return E.invalid_transaction_timeout, 0
    if (req.producer_id == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH):
        return E.invalid_request, 0
    return E.none, timeout_ms


def is_fenced(meta: TransactionMetadata, expected: tuple[int, int] | None) -> bool:
    """A caller naming ``expected`` is not this transaction's producer (PRODUCER_FENCED)."""
    if expected is None or meta.producer_epoch == NO_PRODUCER_EPOCH:
        return False
    return not (
        expected[0] == meta.producer_id
        # A retry after a producer id rotation whose reply was lost.
        or (expected[0] == meta.last_producer_id and expected[1] >= MAX_EPOCH - 1)
        # The producer that kept a prepared transaction under a rotated producer id.
        or (meta.kept_identity is not None and expected[0] == meta.kept_identity[0])
    )


def granted_identity(
    meta: TransactionMetadata,
    expected: tuple[int, int] | None,
    allocate_producer_id: Callable[[], int],
) -> tuple[int, int, int] | None:
    """``(producer id, epoch, last epoch)`` for a caller of a transaction with none open:
    the next epoch, the same one again for a retry whose reply was lost, or a new producer
    id at epoch 0 once the epochs are exhausted. None: the caller is fenced."""
    new_pid, epoch = meta.producer_id, meta.producer_epoch
    if expected is None:
        new_epoch, last_epoch = epoch + 1, NO_PRODUCER_EPOCH
    elif epoch == NO_PRODUCER_EPOCH or expected[1] == epoch:
        new_epoch, last_epoch = epoch + 1, epoch
    elif expected[1] == meta.last_producer_epoch:
        # Retry of a successful call whose reply was lost: hand out the same epoch.
        new_epoch, last_epoch = epoch, meta.last_producer_epoch
    else:
        return None
    if new_epoch != epoch and meta.is_epoch_exhausted:
        new_pid, new_epoch = allocate_producer_id(), 0
        last_epoch = epoch if expected is not None else NO_PRODUCER_EPOCH
    return new_pid, new_epoch, last_epoch


def init_reply(meta: TransactionMetadata) -> Reply:
    """InitProducerId's answer once its record is durable; for keepPreparedTxn, the kept
    identity and the identity of the transaction it kept."""
    kept = meta.kept_identity
    if meta.state is TxnState.ONGOING and kept is not None:
        return Reply(
            E.none,
            *kept,
            ongoing_producer_id=meta.producer_id,
            ongoing_producer_epoch=meta.producer_epoch,
        )
    return Reply(E.none, meta.producer_id, meta.producer_epoch)
