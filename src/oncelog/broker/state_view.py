"""What the metrics endpoint and the web console show, read from the broker's services at
the moment someone asks, and the console's one action (abort a hanging transaction).

Nothing here is updated on the hot path: partitions, transactions and groups are read
through the storage logs' and the coordinator services' query methods, never by reaching
into a coordinator core. Aborting goes through the same service methods the admin tools'
requests reach (``oncelog transactions abort``): InitProducerId for a transactional id the
coordinator tracks, WriteTxnMarkers for a partition's transaction it does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from oncelog.group.messages import OffsetFetchRequest
from oncelog.hanging import ORPHANED, OVERDUE, REASONS, hanging_kind
from oncelog.storage.producer_state import OpenTxn
from oncelog.txn.messages import TxnMarker
from oncelog.txn.metadata import TransactionMetadata

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker
    from oncelog.storage.unified_log import UnifiedLog

INTERNAL_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
# An admin abort by transactional id retries CONCURRENT_TRANSACTIONS as the client does.
ABORT_DEADLINE_S = 15.0


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    open_txns: tuple[OpenTxn, ...]  # oldest first
    size_bytes: int = 0  # bytes of its segment files
    # The largest record timestamp of its newest non-empty segment (the clock retention.ms
    # judges by), -1 when unknown: when it was last written to.
    newest_timestamp: int = -1

    @property
    def internal(self) -> bool:
        return self.topic in INTERNAL_TOPICS

    @property
    def lso_lag(self) -> int:
        return self.high_watermark - self.last_stable_offset

    def lso_lag_ms(self, now_ms: int) -> int:
        """How long the LSO has been held back: the age of the oldest open transaction's
        first batch in this partition (0 when nothing is open)."""
        return max(0, now_ms - self.open_txns[0].first_timestamp) if self.open_txns else 0


@dataclass(frozen=True, slots=True)
class TxnView:
    """A transaction as the coordinator knows it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's name: Ongoing, PrepareCommit, ...
    timeout_ms: int
    start_ms: int  # -1 when no transaction is open
    partitions: tuple[tuple[str, int], ...]
    updated_ms: int = -1  # the coordinator's last state change of this transactional id

    @property
    def is_open(self) -> bool:
        return self.state in ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")

    def age_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.start_ms) if self.is_open and self.start_ms >= 0 else 0


@dataclass(frozen=True, slots=True)
class Hanging:
    """An open transaction that holds the LSO back for longer than it may, by the rule of
    :mod:`oncelog.hanging` (``kind``: overdue or orphaned), which ``oncelog transactions
    find-hanging`` applies too."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    age_ms: int
    transactional_id: str | None  # set when the coordinator tracks it (overdue)
    kind: str  # hanging.OVERDUE or hanging.ORPHANED

    @property
    def overdue(self) -> bool:
        return self.kind == OVERDUE

    @property
    def reason(self) -> str:
        return REASONS[self.kind]


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    state: str
    topic: str
    partition: int
    committed: int
    high_watermark: int
    last_stable_offset: int = -1  # -1: not known (taken as the high watermark)
    # Max timestamp of the batch holding the committed offset (the first record the group
    # has not consumed), -1 when there is none or finding it would wait for the disk.
    next_timestamp: int = -1

    @property
    def lag(self) -> int:
        """To the log end, as Kafka's kafka-consumer-groups.sh computes LAG (it lists
        offsets with read_uncommitted isolation): what /metrics exports."""
        return max(0, self.high_watermark - self.committed)

    @property
    def lso(self) -> int:
        return self.high_watermark if self.last_stable_offset < 0 else self.last_stable_offset

    @property
    def lag_to_lso(self) -> int:
        """What a read_committed consumer still has to read: it cannot fetch past the LSO,
        so one that is caught up sits there even while an open transaction holds it back."""
        return max(0, self.lso - self.committed)

    def lag_ms(self, now_ms: int, *, to_lso: bool) -> int | None:
        """How long ago the first unconsumed record was written (0 when nothing is left
        to read; None when its timestamp is not known)."""
        if (self.lag_to_lso if to_lso else self.lag) == 0:
            return 0
        return max(0, now_ms - self.next_timestamp) if self.next_timestamp >= 0 else None


@dataclass(frozen=True, slots=True)
class AbortOutcome:
    ok: bool
    message: str


class BrokerStateView:
    def __init__(self, broker: Broker, clock: Callable[[], int]) -> None:
        self._broker = broker
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock()

    # -- partitions --------------------------------------------------------------------

    def partitions(self, *, internal: bool = False) -> list[PartitionState]:
        out = []
        for topic in list(self._broker.topics.topics.values()):
            if not internal and topic.name in INTERNAL_TOPICS:
                continue
            for index, log in enumerate(list(topic.partitions)):
                out.append(
                    PartitionState(
                        topic.name,
                        index,
                        log.log_start_offset,
                        log.high_watermark,
                        log.last_stable_offset,
                        tuple(log.open_transactions()),
                        log.size_bytes(),
                        _newest_timestamp(log),
                    )
                )
        return out

    def live_producer_ids(self) -> int:
        """Distinct producer ids with state in any partition (Kafka's ProducerIdCount)."""
        ids: set[int] = set()
        for topic in list(self._broker.topics.topics.values()):
            for log in list(topic.partitions):
                ids.update(log.producer_ids())
        return len(ids)

    # -- transactions ------------------------------------------------------------------

    def transactions(self) -> list[TxnView]:
        if not self._broker.txn.loaded:
            return []
        return [_txn_view(m) for m in self._broker.txn.list_transactions()]

    def hanging(
        self,
        partitions: list[PartitionState] | None = None,
        transactions: list[TxnView] | None = None,
    ) -> list[Hanging]:
        now = self._clock()
        parts = self.partitions(internal=True) if partitions is None else partitions
        txns = self.transactions() if transactions is None else transactions
        open_by_pid = {t.producer_id: t for t in txns if t.is_open}
        max_timeout = self._broker.txn.config.max_timeout_ms
        out = []
        for p in parts:
            for o in p.open_txns:
                txn = open_by_pid.get(o.producer_id)
                # Tracked: the coordinator's open transaction of this producer holds the
                # partition (as find-hanging checks through DescribeTransactions).
                tracked = txn is not None and (p.topic, p.partition) in txn.partitions
                kind = hanging_kind(
                    tracked=tracked,
                    txn_age_ms=txn.age_ms(now) if txn is not None else 0,
                    txn_timeout_ms=txn.timeout_ms if txn is not None else 0,
                    producer_idle_ms=now - o.last_timestamp,
                    max_timeout_ms=max_timeout,
                )
                if kind == OVERDUE:
                    assert txn is not None
                    out.append(_hanging(p, o, txn.age_ms(now), txn.transactional_id, kind))
                elif kind == ORPHANED:
                    out.append(_hanging(p, o, now - o.first_timestamp, None, kind))
        return out

    # -- consumer groups ---------------------------------------------------------------

    def group_lag(self) -> list[GroupLag]:
        groups = self._broker.groups
        listed = groups.list_groups()
        if listed.error is not ErrorCode.none:
            return []
        out = []
        for g in sorted(listed.groups, key=lambda g: g.group_id):
            reply = groups.committed_offsets(OffsetFetchRequest(g.group_id, None))
            for topic, parts in reply.topics:
                for fetched in parts:
                    if fetched.offset < 0:
                        continue
                    log = self._broker.topics.partition(topic, fetched.partition)
                    if log is None:
                        hw = lso = fetched.offset
                        next_ts = -1
                    else:
                        hw, lso = log.high_watermark, log.last_stable_offset
                        # Cached-only: never waits for the disk (then the time is unknown).
                        found = log.batch_timestamp(fetched.offset) if fetched.offset < hw else None
                        next_ts = -1 if found is None else found
                    out.append(
                        GroupLag(
                            g.group_id,
                            g.state,
                            topic,
                            fetched.partition,
                            fetched.offset,
                            hw,
                            lso,
                            next_ts,
                        )
                    )
        return out

    # -- the console's action -------------------------------------------------------------

    async def abort(self, topic: str, partition: int, producer_id: int) -> AbortOutcome:
        """Abort the hanging transaction of ``producer_id`` in ``topic``-``partition``, as
        ``oncelog transactions abort`` would: by transactional id when the coordinator
        tracks it (InitProducerId fences the producer and aborts), else with an ABORT marker
        (WriteTxnMarkers). Only a transaction that is hanging now may be aborted."""
        match = [
            h
            for h in self.hanging()
            if (h.topic, h.partition, h.producer_id) == (topic, partition, producer_id)
        ]
        if not match:
            return AbortOutcome(
                False, f"no hanging transaction of producer {producer_id} in {topic}-{partition}"
            )
        h = match[0]
        txn = self._broker.txn
        if h.transactional_id is not None:
            timeout = next(
                (t.timeout_ms for t in self.transactions() if t.producer_id == producer_id),
                txn.config.max_timeout_ms,
            )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + ABORT_DEADLINE_S
            while True:
                reply = await txn.init_producer_id(h.transactional_id, timeout)
                if reply.error is not ErrorCode.concurrent_transactions:
                    break
                if loop.time() > deadline:
                    break
                await asyncio.sleep(0.1)
            if reply.error is not ErrorCode.none:
                return AbortOutcome(
                    False, f"abort of {h.transactional_id}: {reply.error.name.upper()}"
                )
            return AbortOutcome(
                True,
                f"aborted {h.transactional_id}: producer {reply.producer_id} "
                f"now at epoch {reply.producer_epoch}",
            )
        code = await txn.write_marker(
            topic,
            partition,
            TxnMarker(h.producer_id, h.producer_epoch, False, max(h.coordinator_epoch, 0)),
        )
        if code is not ErrorCode.none:
            return AbortOutcome(False, f"ABORT marker for {topic}-{partition}: {code.name.upper()}")
        return AbortOutcome(
            True, f"wrote ABORT marker for producer {producer_id} to {topic}-{partition}"
        )


def _txn_view(m: TransactionMetadata) -> TxnView:
    return TxnView(
        m.transactional_id,
        m.producer_id,
        m.producer_epoch,
        m.state.kafka_name,
        m.txn_timeout_ms,
        m.txn_start_ms,
        tuple(sorted(m.partitions)),
        m.txn_last_update_ms,
    )


def _newest_timestamp(log: UnifiedLog) -> int:
    # The newest segment with a timestamp: in memory, no read (segments roll in time).
    for seg in reversed(log.segments):
        if seg.max_timestamp >= 0:
            return seg.max_timestamp
    return -1


def _hanging(
    p: PartitionState, o: OpenTxn, age_ms: int, transactional_id: str | None, kind: str
) -> Hanging:
    return Hanging(
        p.topic,
        p.partition,
        o.producer_id,
        o.producer_epoch,
        o.coordinator_epoch,
        o.first_offset,
        age_ms,
        transactional_id,
        kind,
    )
