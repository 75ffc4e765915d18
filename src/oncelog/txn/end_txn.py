"""EndTxn's decision (Kafka's ``TransactionCoordinator.endTransaction``): answer now, or
the PrepareCommit/PrepareAbort metadata to write. Transaction version 1 keeps the epoch;
version 2 (KIP-890 part 2) bumps it on every EndTxn and recognises a retry by the epoch
one below; a two-phase-commit transaction kept by InitProducerId keepPreparedTxn (KIP-939)
may only be ended by its kept identity. Pure functions of the request and the
transaction's metadata; ``TransactionCoordinator.end_txn`` turns a target into a
transition (the reply comes once the PrepareX record is durable)."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from oncelog.txn.identity import successor
from oncelog.txn.messages import Reply
from oncelog.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TransactionMetadata,
    TxnState,
    TxnStateError,
    is_epoch_exhausted,
)

E = ErrorCode
S = TxnState

# A reply now, or the PrepareX metadata whose durable write answers the request.
Decision = Reply | TransactionMetadata


def end_txn_tv1(meta: TransactionMetadata, commit: bool, now_ms: int) -> Decision:
    """EndTxn up to v4, for a caller whose producer id and epoch were checked."""
    if meta.pending_state is not None:
        return Reply(E.concurrent_transactions)
    state = meta.state
    if state is S.ONGOING:
        return meta.prepare(
            S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
            txn_last_update_ms=now_ms,
            client_transaction_version=TV_0,
        )
    if state is S.COMPLETE_COMMIT or state is S.COMPLETE_ABORT:
        done = (state is S.COMPLETE_COMMIT) == commit  # a retry of a finished EndTxn
        return Reply(E.none if done else E.invalid_txn_state)
    if state is S.PREPARE_COMMIT or state is S.PREPARE_ABORT:
        same = (state is S.PREPARE_COMMIT) == commit
        return Reply(E.concurrent_transactions if same else E.invalid_txn_state)
    if state is S.EMPTY:
        return Reply(E.invalid_txn_state)
    raise TxnStateError(f"{meta.transactional_id} in unexpected state {state.kafka_name}")


def end_txn_tv2(
    meta: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
) -> Decision:
    """EndTxn v5 (Kafka's TV2 endTransaction). The epoch of a finished transaction is
    one above the client's, so "same epoch" means the next transaction and "epoch + 1"
    a retry; a retry after an overflow names the previous producer id at MAX_EPOCH - 1.

    ========================  =============  =============  ============  =============
    state \\ request           abort, retry   abort, same    commit, retry commit, same
    ========================  =============  =============  ============  =============
    Empty                     fenced         bump           fenced        invalid state
    CompleteAbort             ok, no bump    bump           invalid state invalid state
    CompleteCommit            invalid state  bump           ok, no bump   invalid state
    ========================  =============  =============  ============  =============
    """
    if meta is None or meta.producer_epoch == NO_PRODUCER_EPOCH:
        return Reply(E.invalid_producer_id_mapping)
    if meta.kept_identity is not None:
        return _end_kept_txn(
            meta, producer_id, producer_epoch, commit, now_ms, allocate_producer_id
        )
    state = meta.state
    retry_on_overflow = (
        meta.last_producer_id == producer_id
        and producer_epoch == MAX_EPOCH - 1
        and meta.producer_epoch == 0
    )
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    if state.is_prepare:
        valid_epoch = retry_on_bump
    elif state.is_complete:
        valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    else:
        valid_epoch = producer_epoch == meta.producer_epoch
    if meta.producer_id != producer_id and not retry_on_overflow:
        return Reply(E.invalid_producer_id_mapping)
    if meta.pending_state is not None:
        return Reply(E.concurrent_transactions)
    if not valid_epoch:
        return Reply(E.producer_fenced)
    is_retry = retry_on_bump or retry_on_overflow
    if state is S.ONGOING:
        return _prepare_end(meta, commit, now_ms, allocate_producer_id)
    if state.is_prepare:
        same = (state is S.PREPARE_COMMIT) == commit
        return Reply(E.concurrent_transactions if same else E.invalid_txn_state)
    if state is S.EMPTY:
        if commit:
            return Reply(E.invalid_txn_state)
        return _prepare_end(meta, False, now_ms, allocate_producer_id)
    if state.is_complete:
        done_commit = state is S.COMPLETE_COMMIT
        if is_retry:
            if done_commit != commit:
                return Reply(E.invalid_txn_state)
            return Reply(E.none, meta.producer_id, meta.producer_epoch)
        if commit:
            return Reply(E.invalid_txn_state)
        # An abort with nothing added yet (e.g. every implicit add failed): bump anyway.
        return _prepare_end(meta, False, now_ms, allocate_producer_id)
    raise TxnStateError(f"{meta.transactional_id} in unexpected state {state.kafka_name}")


def _end_kept_txn(
    meta: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
) -> Decision:
    """EndTxn v5 of a 2PC transaction kept by InitProducerId keepPreparedTxn: only the
    kept identity may end it. The markers carry the transaction's epoch + 1; the reply
    (and the identity at completion) is the kept identity's successor."""
    kept = meta.kept_identity
    assert kept is not None
    state = meta.state
    if state.is_prepare:
        # kept is already the successor: the caller's retry names the one before it.
        retry = (producer_id, producer_epoch + 1) == kept or (
            kept[1] == 0 and is_epoch_exhausted(producer_epoch)
        )
        if not retry:
            return Reply(E.producer_fenced)
        same = (state is S.PREPARE_COMMIT) == commit
        return Reply(E.concurrent_transactions if same else E.invalid_txn_state)
    if state is not S.ONGOING:
        raise TxnStateError(f"{meta.transactional_id}: kept identity in {state.kafka_name}")
    if producer_id != kept[0]:
        return Reply(E.invalid_producer_id_mapping)
    if meta.pending_state is not None:
        return Reply(E.concurrent_transactions)
    if producer_epoch != kept[1]:
        return Reply(E.producer_fenced)
    next_pid, next_epoch = successor(*kept, allocate_producer_id)
    return meta.prepare(
        S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
        producer_epoch=meta.producer_epoch + 1,
        last_producer_epoch=meta.producer_epoch,
        next_producer_id=next_pid,
        next_producer_epoch=next_epoch,
        client_transaction_version=TV_2,
        txn_last_update_ms=now_ms,
    )


def _prepare_end(
    meta: TransactionMetadata,
    commit: bool,
    now_ms: int,
    allocate_producer_id: Callable[[], int],
) -> TransactionMetadata:
    epoch = meta.producer_epoch
    # Clients never hold MAX_EPOCH, so the coordinator can always fence; an exhausted
    # epoch is bumped one last time and a new producer id takes over at completion.
    next_pid = allocate_producer_id() if meta.is_epoch_exhausted else NO_PRODUCER_ID
    idle = meta.state is not S.ONGOING
    return meta.prepare(
        S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
        producer_epoch=epoch if epoch == MAX_EPOCH and not commit else epoch + 1,
        last_producer_epoch=epoch,
        next_producer_id=next_pid,
        client_transaction_version=TV_2,
        txn_start_ms=now_ms if idle else meta.txn_start_ms,
        txn_last_update_ms=now_ms,
    )
