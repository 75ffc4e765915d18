"""Transaction states and per-transactional-id metadata (KIP-98; transaction versions 1 and 2;
KIP-939 two-phase commit).

Every state change is two-phase, as in Kafka: ``prepare(...)`` checks the transition, marks
``pending_state`` and returns the *target* metadata (what will be written to
``__transaction_state``); ``complete(target)`` applies it once the record is durable. While a
transition is pending, the coordinator refuses further changes with CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Java Short.MAX_VALUE
# KIP-939: a two-phase-commit transaction has no timeout. As in Kafka, that is its only mark
# (``txn_timeout_ms`` = Java Integer.MAX_VALUE), so it survives the log round trip as is.
TWO_PC_TIMEOUT_MS = 2_147_483_647

# Kafka's TransactionVersion feature levels (``transaction.version``): what a request's
# version says about its client. Level 2 (KIP-890 part 2) bumps the epoch on every EndTxn.
TV_0 = 0
TV_2 = 2


def supports_epoch_bump(transaction_version: int) -> bool:
    return transaction_version >= TV_2


TopicPartition = tuple[str, int]


class TxnStateError(RuntimeError):
    """An illegal transition was attempted: a coordinator bug, never a client error."""


class TxnState(IntEnum):
    """Kafka's transaction states; the values are the ids written to the transaction log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions expose, e.g. ``PrepareCommit``."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState:
        for state, kname in _NAMES.items():
            if kname == name:
                return state
        raise ValueError(f"unknown transaction state name {name!r}")

    @property
    def valid_previous_states(self) -> frozenset[TxnState]:
        return _VALID_PREVIOUS[self]

    @property
    def expiration_allowed(self) -> bool:
        """Only idle ids (no transaction in progress) may be expired."""
        return self in _EXPIRABLE

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES: dict[TxnState, str] = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_IDLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
_EXPIRABLE = _IDLE

# Kafka 4.x's table. PrepareAbort may follow an idle state only for a TV2 client (an abort
# before any partition was added implicitly); ``prepare`` enforces that.
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _IDLE,
    TxnState.ONGOING: _IDLE | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: _IDLE | {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: _IDLE,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Clients never get Short.MAX_VALUE, so a fence can always bump once more."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID  # producer id before the latest transition
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # lets a lost InitProducerId reply be retried
    txn_timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    # Output partitions and the group's __consumer_offsets partition alike.
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    pending_state: TxnState | None = None
    # A fence bump whose log write failed: the epoch is bumped in memory only, so the next
    # fence must not bump again (the bumped epoch was never handed to anyone).
    has_failed_epoch_fence: bool = False
    # TV2 epoch overflow: the producer id that replaces ``producer_id`` (at epoch 0) once
    # the PrepareX record's markers are written; NO_PRODUCER_ID otherwise.
    next_producer_id: int = NO_PRODUCER_ID
    # KIP-939 keepPreparedTxn: while a prepared 2PC transaction stays Ongoing under
    # ``producer_id``/``producer_epoch``, the producer that kept it holds this epoch (and
    # ``next_producer_id``, or ``producer_id`` if that is unset); at completion that identity
    # takes over. NO_PRODUCER_EPOCH otherwise.
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    # The transaction version of the client's latest transition (TV_0 or TV_2).
    client_transaction_version: int = TV_0

    def copy(self) -> TransactionMetadata:
        return dataclasses.replace(self, partitions=set(self.partitions))

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def is_two_phase_commit(self) -> bool:
        """A KIP-939 transaction: it never times out; only its producer (or an operator)
        ends it."""
        return self.txn_timeout_ms == TWO_PC_TIMEOUT_MS

    @property
    def kept_identity(self) -> tuple[int, int] | None:
        """The producer id and epoch of the producer that kept this prepared transaction
        (InitProducerId keepPreparedTxn), or ``None``."""
        if self.next_producer_epoch == NO_PRODUCER_EPOCH:
            return None
        pid = self.producer_id if self.next_producer_id == NO_PRODUCER_ID else self.next_producer_id
        return pid, self.next_producer_epoch

    # -- two-phase transitions -------------------------------------------------------------

    def prepare(self, state: TxnState, **changes: object) -> TransactionMetadata:
        """Check the transition, mark it pending and return the target metadata."""
        if self.pending_state is not None:
            raise TxnStateError(
                f"{self.transactional_id}: transition to {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        if self.state not in state.valid_previous_states:
            raise TxnStateError(
                f"{self.transactional_id}: illegal transition "
                f"{self.state.kafka_name} -> {state.kafka_name}"
            )
        fields: dict[str, object] = {
            "state": state,
            "partitions": set(self.partitions),
            "last_producer_id": self.producer_id,
            "pending_state": None,
            "has_failed_epoch_fence": False,
        }
        fields.update(changes)
        target = dataclasses.replace(self, **fields)  # type: ignore[arg-type]
        if (
            state is TxnState.PREPARE_ABORT
            and self.state in _IDLE
            and not supports_epoch_bump(target.client_transaction_version)
        ):
            raise TxnStateError(
                f"{self.transactional_id}: illegal transition {self.state.kafka_name} -> "
                f"{state.kafka_name} for a transaction version 1 client"
            )
        if target.producer_id < 0 or (state is not TxnState.DEAD and target.producer_epoch < 0):
            raise TxnStateError(f"{self.transactional_id}: illegal producer id/epoch in {target}")
        self.pending_state = state
        return target

    def complete(self, target: TransactionMetadata) -> None:
        """Apply a prepared transition after its record was appended."""
        if self.pending_state is not target.state:
            raise TxnStateError(
                f"{self.transactional_id}: completing {target.state.kafka_name} "
                f"but pending is {self.pending_state}"
            )
        self._check_target(target)
        self.producer_id = target.producer_id
        self.last_producer_id = target.last_producer_id
        self.producer_epoch = target.producer_epoch
        self.last_producer_epoch = target.last_producer_epoch
        self.txn_timeout_ms = target.txn_timeout_ms
        self.state = target.state
        self.partitions = set(target.partitions)
        self.txn_start_ms = target.txn_start_ms
        self.txn_last_update_ms = target.txn_last_update_ms
        self.next_producer_id = target.next_producer_id
        self.next_producer_epoch = target.next_producer_epoch
        self.client_transaction_version = target.client_transaction_version
        self.pending_state = None
        self.has_failed_epoch_fence = False  # whatever we fenced with is now durable

    def _check_target(self, t: TransactionMetadata) -> None:
        # Mirrors the sanity checks of Kafka's completeTransitionTo.
        same = t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch
        tv2 = supports_epoch_bump(t.client_transaction_version)
        # Every TV2 EndTxn bumps the epoch (by one; an abort at Short.MAX_VALUE stays there).
        tv2_bump = (
            tv2
            and t.producer_id == self.producer_id
            and t.producer_epoch
            in (
                self.producer_epoch + 1,
                MAX_EPOCH,
            )
        )
        if t.state is TxnState.EMPTY:
            bumped = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id
            )
            ok = (same or bumped) and not t.partitions and t.txn_start_ms == -1
        elif t.state is TxnState.ONGOING:
            ok = (
                same and t.partitions >= self.partitions and t.txn_timeout_ms == self.txn_timeout_ms
            )
        elif t.state.is_prepare:
            fence = (
                t.state is TxnState.PREPARE_ABORT
                and t.producer_id == self.producer_id
                and (
                    t.producer_epoch == self.producer_epoch + 1
                    # TV2: the fence bump, then the TV2 abort's own bump
                    or (tv2 and t.producer_epoch == self.producer_epoch + 2)
                )
            )
            # TV2: an abort with no transaction open (nothing was added implicitly yet).
            idle_abort = tv2 and t.state is TxnState.PREPARE_ABORT and self.state in _IDLE
            ok = (
                (same or fence or tv2_bump)
                and t.partitions == self.partitions
                and t.txn_timeout_ms == self.txn_timeout_ms
                and (t.txn_start_ms == self.txn_start_ms or idle_abort)
            )
        elif t.state.is_complete:
            # TV2 epoch overflow: the next producer id takes over at epoch 0.
            rotated = (
                tv2
                and self.next_producer_id != NO_PRODUCER_ID
                and t.producer_id == self.next_producer_id
                and t.producer_epoch == 0
            )
            # KIP-939: the producer that kept the prepared transaction takes over.
            kept = (t.producer_id, t.producer_epoch) == self.kept_identity
            ok = (
                (same or rotated or kept)
                and t.txn_timeout_ms == self.txn_timeout_ms
                and t.txn_start_ms != -1
            )
        else:  # Dead is never completed (the id is removed) and PrepareEpochFence never logged
            ok = False
        if not ok:
            raise TxnStateError(f"{self.transactional_id}: bad transition {self} -> {t}")

    def cancel_pending(self) -> None:
        """The log append failed: forget the transition."""
        self.pending_state = None


def select(
    metas: Iterable[TransactionMetadata],
    states: Iterable[TxnState | str] | None = None,
    producer_ids: Iterable[int] | None = None,
    min_duration_ms: int | None = None,
    now_ms: int | None = None,
) -> Iterator[TransactionMetadata]:
    """ListTransactions filters: empty ones match all; ``min_duration_ms`` (KIP-994, ignored
    when negative) keeps transactions that started more than that long before ``now_ms``."""
    want_states = (
        {s if isinstance(s, TxnState) else TxnState.from_kafka_name(s) for s in states}
        if states
        else None
    )
    want_pids = set(producer_ids) if producer_ids else None
    by_age = min_duration_ms is not None and min_duration_ms >= 0
    if by_age and now_ms is None:
        raise ValueError("min_duration_ms needs now_ms")
    for m in metas:
        if want_states is not None and m.state not in want_states:
            continue
        if want_pids is not None and m.producer_id not in want_pids:
            continue
        if by_age:
            assert now_ms is not None and min_duration_ms is not None
            if m.txn_start_ms < 0 or now_ms - m.txn_start_ms <= min_duration_ms:
                continue
        yield m
