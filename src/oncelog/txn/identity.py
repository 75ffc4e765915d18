"""Which producer identity (id, epoch) a transaction's requests must name, and which one
its producer uses next: the rules of epoch bumps (KIP-360, KIP-890 transaction version
2) and of a kept two-phase-commit transaction (KIP-939). Pure functions of the
transaction's metadata."""

from __future__ import annotations

from collections.abc import Callable

from oncelog.txn.metadata import (
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnState,
    is_epoch_exhausted,
    supports_epoch_bump,
)


def successor(
    producer_id: int, producer_epoch: int, allocate_producer_id: Callable[[], int]
) -> tuple[int, int]:
    """The identity after ``producer_id``/``producer_epoch``: the next epoch, or a new
    producer id at epoch 0 once the epochs are exhausted."""
    if is_epoch_exhausted(producer_epoch):
        return allocate_producer_id(), 0
    return producer_id, producer_epoch + 1


def next_identity(meta: TransactionMetadata) -> tuple[int, int]:
    """The producer id and epoch a TV2 producer uses after ``meta``'s PrepareX: the same id
    at the bumped epoch, or the next producer id at epoch 0 after an epoch overflow; for a
    kept 2PC transaction, the kept identity's successor."""
    if meta.kept_identity is not None:
        return meta.kept_identity
    if meta.next_producer_id != NO_PRODUCER_ID:
        return meta.next_producer_id, 0
    return meta.producer_id, meta.producer_epoch


def client_identity(meta: TransactionMetadata) -> tuple[int, int]:
    """The producer id and epoch a request must name: the kept identity while a kept 2PC
    transaction is open (or being ended by a TV1 EndTxn, which does not bump it)."""
    kept = meta.kept_identity
    if kept is not None and (
        meta.state is TxnState.ONGOING
        or (meta.state.is_prepare and not supports_epoch_bump(meta.client_transaction_version))
    ):
        return kept
    return meta.producer_id, meta.producer_epoch
