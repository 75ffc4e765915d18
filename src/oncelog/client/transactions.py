"""Transactions of other producers, with the retry policy: complete or abort them (EndTxn,
or for a prepared two-phase-commit transaction InitProducerId keepPreparedTxn + its own
EndTxn, KIP-939), fence them (InitProducerId), describe and list them, and repair hanging
ones (KIP-664).

Used by the Spark sink's driver (it commits the task transactions its executors prepared)
and by ``oncelog transactions``.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.protocol import ProducerInfo, ProtocolClient, TxnListing
from oncelog.client.retry import DEFAULT_POLICY, RetryPolicy
from oncelog.hanging import OVERDUE, REASONS, hanging_kind

T = TypeVar("T")
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")
# KIP-939: a two-phase-commit transaction's timeout (Integer.MAX_VALUE ms), its only mark.
TWO_PHASE_TIMEOUT = datetime.timedelta(milliseconds=2_147_483_647)


@dataclass(frozen=True, slots=True)
class HangingTxn:
    """One hanging transaction in one partition (see :mod:`oncelog.hanging`)."""

    producer: ProducerInfo
    transactional_id: str | None  # known when the coordinator tracks it (overdue)
    kind: str  # hanging.OVERDUE or hanging.ORPHANED

    @property
    def reason(self) -> str:
        return REASONS[self.kind]

    # The producer's facts, as find-hanging lists them.
    @property
    def topic(self) -> str:
        return self.producer.topic

    @property
    def partition(self) -> int:
        return self.producer.partition

    @property
    def producer_id(self) -> int:
        return self.producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.producer.producer_epoch

    @property
    def coordinator_epoch(self) -> int:
        return self.producer.coordinator_epoch

    @property
    def current_txn_start_offset(self) -> int:
        return self.producer.current_txn_start_offset


def _ms(value: Any) -> int:
    """A kio timestamp (datetime) or milliseconds as milliseconds."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def _duration_ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def is_two_phase(state: Any) -> bool:
    """Is this DescribeTransactions state a two-phase-commit transaction's (KIP-939)?"""
    return state is not None and state.transaction_timeout == TWO_PHASE_TIMEOUT


class TxnAdmin:
    """Cheap to create, connects lazily, pickle-safe."""

    def __init__(
        self, config: ClientConfig, *, policy: RetryPolicy = DEFAULT_POLICY, timeout: float = 30.0
    ) -> None:
        self.config = config
        self.policy = policy
        self.protocol = ProtocolClient(config, timeout=timeout)

    def close(self) -> None:
        self.protocol.close()

    def __enter__(self) -> TxnAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[ProtocolClient], T]) -> T:
        return self.policy.call(lambda: fn(self.protocol), on_retry=self._before_retry)

    def _before_retry(self, exc: BaseException) -> None:
        # A broken connection is dropped and reopened; a retriable broker error may mean
        # that leadership moved: the next attempt routes from fresh metadata.
        if isinstance(exc, OSError):
            self.protocol.close()
        self.protocol.forget_metadata()

    # -- completing and fencing --------------------------------------------------------
    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn for someone else's transaction. Retriable codes are retried within the
        policy's deadline; the final code (NONE, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
        INVALID_TXN_STATE, ...) is returned for the caller to judge."""

        def once(p: ProtocolClient) -> ErrorCode:
            code = p.end_txn(transactional_id, producer_id, producer_epoch, commit)
            if code.retriable:
                raise ClientError(f"EndTxn of {transactional_id!r}: {code.name.upper()}", code)
            return code

        return self._call(once)

    def complete_prepared(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """End a prepared two-phase-commit transaction (KIP-939) as its own producer:
        InitProducerId v6 keepPreparedTxn, then EndTxn with the identity it returns, instead
        of an EndTxn on the preparing producer's behalf. INVALID_TXN_STATE when the id has
        no transaction of ``producer_id``/``producer_epoch`` open; otherwise the final code,
        as :meth:`end_txn` returns it."""

        def once(p: ProtocolClient) -> ErrorCode:
            kept = p.keep_prepared(transactional_id)
            if kept.error.retriable:
                raise ClientError(
                    f"InitProducerId (keepPreparedTxn) of {transactional_id!r}: "
                    f"{kept.error.name.upper()}",
                    kept.error,
                )
            if kept.error != ErrorCode.none:
                return kept.error
            if (kept.ongoing_producer_id, kept.ongoing_producer_epoch) != (
                producer_id,
                producer_epoch,
            ):
                return ErrorCode.invalid_txn_state
            code = p.end_own_txn(transactional_id, kept.producer_id, kept.producer_epoch, commit)
            if code.retriable:
                raise ClientError(f"EndTxn of {transactional_id!r}: {code.name.upper()}", code)
            return code

        return self._call(once)

    def fence(self, transactional_id: str) -> tuple[int, int]:
        """Abort whatever the id has open by bumping its epoch (InitProducerId), as a new
        producer instance would. Returns the new (producer_id, epoch)."""
        state = self.describe_txn(transactional_id)
        if state is None:
            raise ClientError(
                f"cannot abort {transactional_id!r}: TRANSACTIONAL_ID_NOT_FOUND",
                ErrorCode.transactional_id_not_found,
            )
        if is_two_phase(state):
            # Its timeout (Integer.MAX_VALUE) is no valid request timeout, and only a 2PC
            # InitProducerId may take over a 2PC transactional id's open transaction.
            return self._call(lambda p: p.abort_two_phase(transactional_id))
        return self._call(lambda p: p.init_producer_id(transactional_id, state.transaction_timeout))

    # -- describing ----------------------------------------------------------------------
    def describe_many(self, transactional_ids: Iterable[str]) -> dict[str, Any]:
        """DescribeTransactions state per id (producer_id, producer_epoch,
        transaction_state, transaction_start_time, transaction_timeout, topics), None for
        ids the coordinator does not know. Retriable errors are retried for the ids they hit."""
        pending = set(transactional_ids)
        out: dict[str, Any] = {}

        def once(p: ProtocolClient) -> dict[str, Any]:
            retry: list[ErrorCode] = []
            for tid, state in p.describe_transactions(sorted(pending)).items():
                if not isinstance(state, ErrorCode):
                    out[tid] = state
                elif state == ErrorCode.transactional_id_not_found:
                    out[tid] = None
                elif state.retriable:
                    retry.append(state)
                    continue
                else:
                    raise ClientError(f"cannot describe {tid!r}: {state.name.upper()}", state)
                pending.discard(tid)
            if pending:
                code = retry[0] if retry else ErrorCode.unknown_server_error
                raise ClientError(
                    f"cannot describe transactions {sorted(pending)}: {code.name.upper()}",
                    code,
                )
            return out

        return self._call(once) if pending else out

    def describe_txn(self, transactional_id: str) -> Any | None:
        """The DescribeTransactions state of one id, None if the coordinator does not know it."""
        return self.describe_many([transactional_id])[transactional_id]

    def list_transactions(
        self,
        states: tuple[str, ...] = (),
        producer_ids: tuple[int, ...] = (),
        min_duration_ms: int = -1,
    ) -> list[TxnListing]:
        return self._call(lambda p: p.list_transactions(states, producer_ids, min_duration_ms))

    def describe_producers(self, topic: str, partition: int) -> list[ProducerInfo]:
        return self._call(lambda p: p.describe_producers(topic, partition))

    def topics(self) -> dict[str, int]:
        return self._call(lambda p: p.refresh())

    # -- hanging transactions (KIP-664) --------------------------------------------------------
    def find_hanging(
        self, topics: list[str] | None = None, max_timeout_ms: int = 900_000
    ) -> list[HangingTxn]:
        """Hanging transactions by :mod:`oncelog.hanging`'s rule, the one the web console
        applies: open in a partition (DescribeProducers) and either overdue at the
        coordinator (DescribeTransactions: open, holding the partition, older than its
        timeout) or orphaned (no open transaction of the producer there, idle for longer
        than ``max_timeout_ms``, Kafka's kafka-transactions.sh find-hanging)."""
        now = int(time.time() * 1000)
        known = self.topics()
        candidates = [
            info
            for topic in topics or sorted(known)
            for p in range(known.get(topic, 0))
            for info in self.describe_producers(topic, p)
            if info.current_txn_start_offset >= 0
        ]
        if not candidates:
            return []
        listed = self.list_transactions(producer_ids=tuple({c.producer_id for c in candidates}))
        open_ids = [t.transactional_id for t in listed if t.state in OPEN_STATES]
        by_producer: dict[int, tuple[str | None, Any]] = {}
        for txn_id, described in self.describe_many(open_ids).items():
            if described is not None and described.transaction_state in OPEN_STATES:
                by_producer[described.producer_id] = (txn_id, described)
        out = []
        for c in candidates:
            tid, state = by_producer.get(c.producer_id, (None, None))
            tracked = state is not None and any(
                t.topic == c.topic and c.partition in t.partitions for t in state.topics
            )
            age = now - _ms(state.transaction_start_time) if state is not None else 0
            kind = hanging_kind(
                tracked=tracked,
                txn_age_ms=age,
                txn_timeout_ms=_duration_ms(state.transaction_timeout) if state is not None else 0,
                producer_idle_ms=now - c.last_timestamp,
                max_timeout_ms=max_timeout_ms,
            )
            if kind is not None:
                out.append(HangingTxn(c, tid if kind == OVERDUE else None, kind))
        return out

    def abort_partition(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int | None = None,
        coordinator_epoch: int | None = None,
    ) -> None:
        """Write an ABORT marker for a hanging transaction (WriteTxnMarkers)."""
        if producer_epoch is None or coordinator_epoch is None:
            match = [
                p for p in self.describe_producers(topic, partition) if p.producer_id == producer_id
            ]
            if not match:
                raise ClientError(
                    f"producer {producer_id} has no state in {topic}-{partition}", retriable=False
                )
            producer_epoch = match[0].producer_epoch if producer_epoch is None else producer_epoch
            coordinator_epoch = (
                max(match[0].coordinator_epoch, 0)
                if coordinator_epoch is None
                else coordinator_epoch
            )
        epochs = (producer_epoch, coordinator_epoch)
        self._call(
            lambda p: p.write_txn_markers(
                topic, partition, producer_id, epochs[0], epochs[1], commit=False
            )
        )
