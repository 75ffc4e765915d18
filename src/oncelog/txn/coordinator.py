"""Sans-IO transaction coordinator: KIP-98 with Kafka 4.x semantics, transaction versions 1 and 2.

Transaction version 2 (KIP-890 part 2) is chosen per request, as Kafka does: an implicit add
(``add_partitions(..., transaction_version=TV_2)``, from Produce v12 or TxnOffsetCommit v5) and
EndTxn v5 (``end_txn(..., transaction_version=TV_2)``). Every TV2 EndTxn bumps the epoch (its
PrepareX record holds the bumped epoch, and so do the markers) and replies with the producer id
and epoch for the next transaction; at an exhausted epoch a new producer id is allocated and
takes over at epoch 0 when the transaction completes.

Two-phase commit (KIP-939) is InitProducerId with ``enable_2pc`` (allowed only when
``transaction.two.phase.commit.enable`` is set): the transaction gets no timeout
(``TWO_PC_TIMEOUT_MS``, its only mark, persisted as Kafka does). ``keep_prepared_txn`` on an
Ongoing 2PC transaction keeps it open instead of aborting it: the caller gets a new epoch
(the *kept identity*, ``next_producer_id``/``next_producer_epoch``) plus the identity the
transaction was written under, and only that new identity may end it (EndTxn); the old one is
fenced. Ending it writes the markers one epoch above the transaction's, and the kept identity
takes over at completion (bumped once more for a TV2 EndTxn).

No sockets, awaits, files or clock reads: time comes in as ``now_ms`` and the only injected
function is ``allocate_producer_id``. Every call returns a ``Step`` (``oncelog.coordinator.runtime``),
which the shared ``CoordinatorRuntime`` performs for ``TransactionService``:

* ``step.reply``: for a request method, a ``Reply`` (final) or ``Pending(token)``; ``None`` for
  feedback and timer calls.
* ``step.appends``: one record each for ``__transaction_state``; ``owner`` is the
  transactional id, ``label`` the ``TxnState`` the record holds. Once durable, the shell calls
  ``on_log_appended(owner, now_ms=, error=)`` and performs the step that returns.
* ``step.effects``: ``WriteMarkers``: write the control batches (retrying until done), then
  call ``on_markers_written(id, now_ms=)``.
* ``step.resolved``: ``(token, Reply)`` for earlier ``Pending`` requests now answered.

Each transactional id has at most one append or marker write outstanding at a time (one
pending transition), so those of different ids may run concurrently, and each callback names
only the id. A failed append is reported with ``error=``: the request then gets the mapped
error (Kafka's mapping), except the CompleteCommit/CompleteAbort record, which is re-emitted
(the shell backs off). A request with ``Pending`` that the shell gives up on (its time budget
ran out) is passed to ``cancel(token)``; only requests parked by ``blocking_begin`` can be
cancelled. Call ``load(records)`` once at start (requests get COORDINATOR_LOAD_IN_PROGRESS
before) and ``expire(now_ms)`` periodically. Before answering an old request version, the API
layer maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH (InitProducerId < v4, AddPartitionsToTxn
< v2, AddOffsetsToTxn < v2, EndTxn < v2), as Kafka does.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, auto

from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.coordinator.placement import partition_for
from oncelog.coordinator.runtime import Append, Pending, client_error
from oncelog.txn.config import TxnConfig
from oncelog.txn.end_txn import end_txn_tv1, end_txn_tv2
from oncelog.txn.identity import client_identity, next_identity, successor
from oncelog.txn.init_producer_id import (
    InitRequest,
    check_request,
    granted_identity,
    init_reply,
    is_fenced,
)
from oncelog.txn.log_codec import decode_key, decode_value, encode_key, encode_value
from oncelog.txn.messages import Reply, WriteMarkers
from oncelog.txn.messages import TxnStep as Step
from oncelog.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    TxnStateError,
    select,
    supports_epoch_bump,
)
from oncelog.txn.parking import AddRequest, ParkingLot

E = ErrorCode
S = TxnState


class CoordinatorProtocolError(RuntimeError):
    """The shell broke the protocol (e.g. a callback for an action that was never emitted)."""


class _Kind(Enum):
    INIT = auto()  # InitProducerId: reply (pid, epoch)
    ADD = auto()  # AddPartitionsToTxn / AddOffsetsToTxn
    END = auto()  # EndTxn: reply once PrepareX is durable, then markers
    FENCE = auto()  # abort with a bumped epoch (InitProducerId during Ongoing, or timeout)
    COMPLETE = auto()  # PrepareX -> CompleteX after markers
    DEAD = auto()  # tombstone for an expired id


@dataclass(slots=True)
class _Transit:
    kind: _Kind
    target: TransactionMetadata
    token: int | None
    awaiting_markers: bool = False


class TransactionCoordinator:
    def __init__(
        self,
        *,
        allocate_producer_id: Callable[[], int],
        config: TxnConfig | None = None,
        coordinator_epoch: int = 0,
    ) -> None:
        self.allocate_producer_id = allocate_producer_id
        cfg = config or TxnConfig()
        self.max_timeout_ms = cfg.max_timeout_ms
        self.id_expiration_ms = cfg.id_expiration_ms
        # Must grow across restarts so partitions reject markers from older incarnations.
        self.coordinator_epoch = coordinator_epoch
        self.blocking_begin = cfg.blocking_begin
        self.two_phase_commit_enable = cfg.two_phase_commit_enable
        self.txn_log_partitions = cfg.txn_log_partitions
        self.offsets_partitions = cfg.offsets_partitions
        self._txns: dict[str, TransactionMetadata] = {}
        self._transits: dict[str, _Transit] = {}
        self._parked = ParkingLot()
        self._tokens = itertools.count(1)
        # Kafka's TransactionStateManager loads each __transaction_state partition on its
        # own: an id is served once its partition is loaded (COORDINATOR_LOAD_IN_PROGRESS
        # before, NOT_COORDINATOR while its load has failed).
        self._loaded: set[int] = set()
        self._failed: set[int] = set()

    # -- placement ------------------------------------------------------------------------

    def txn_log_partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.txn_log_partitions)

    def offsets_partition(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    # -- requests -------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        *,
        now_ms: int,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> Step:
        early = self._precheck(transactional_id)
        if early is not None:
            return Step(reply=early)
        req = InitRequest(timeout_ms, producer_id, producer_epoch, enable_2pc, keep_prepared_txn)
        error, timeout_ms = check_request(
            req,
            two_phase_commit_enable=self.two_phase_commit_enable,
            max_timeout_ms=self.max_timeout_ms,
        )
        if error is not E.none:
            return Step(reply=Reply(error))
        meta = self._txns.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(
                transactional_id,
                self.allocate_producer_id(),
                txn_timeout_ms=timeout_ms,
                txn_last_update_ms=now_ms,
            )
            self._txns[transactional_id] = meta
        if meta.pending_state is not None or meta.state.is_prepare:
            return Step(reply=Reply(E.concurrent_transactions))
        if is_fenced(meta, req.expected):
            return Step(reply=Reply(E.producer_fenced))
        if meta.state is S.ONGOING:
            if keep_prepared_txn:
                return self._keep_prepared(meta, now_ms)
            # Abort the open transaction under a bumped epoch; the client retries and gets a
            # second bump (or a new producer id if the fence exhausted the epochs).
            return self._request_step(meta, _Kind.FENCE, self._fence_target(meta, now_ms))
        if meta.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise TxnStateError(f"{transactional_id} in unexpected state {meta.state.kafka_name}")
        granted = granted_identity(meta, req.expected, self.allocate_producer_id)
        if granted is None:
            return Step(reply=Reply(E.producer_fenced))
        new_pid, new_epoch, last_epoch = granted
        target = meta.prepare(
            S.EMPTY,
            producer_id=new_pid,
            producer_epoch=new_epoch,
            last_producer_epoch=last_epoch,
            txn_timeout_ms=timeout_ms,
            partitions=set(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
            next_producer_epoch=NO_PRODUCER_EPOCH,
        )
        return self._request_step(meta, _Kind.INIT, target)

    def _keep_prepared(self, meta: TransactionMetadata, now_ms: int) -> Step:
        """KIP-939 keepPreparedTxn: leave the 2PC transaction Ongoing and give the caller the
        next epoch of the latest kept identity (a new producer id at an exhausted epoch)."""
        if not meta.is_two_phase_commit:
            # Only a transaction opened with enable2Pc was promised to stay prepared.
            return Step(reply=Reply(E.invalid_txn_state))
        pid, epoch = meta.kept_identity or (meta.producer_id, meta.producer_epoch)
        pid, epoch = successor(pid, epoch, self.allocate_producer_id)
        target = meta.prepare(
            S.ONGOING,
            next_producer_id=pid,
            next_producer_epoch=epoch,
            txn_last_update_ms=now_ms,
        )
        return self._request_step(meta, _Kind.INIT, target)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
        verify_only: bool = False,
        transaction_version: int = TV_0,
    ) -> Step:
        parts = frozenset(partitions)
        early = self._precheck(transactional_id)
        if early is not None:
            if verify_only:
                early = Reply(early.error, partition_errors=dict.fromkeys(parts, early.error))
            return Step(reply=early)
        if verify_only:
            return Step(reply=self._verify(transactional_id, producer_id, producer_epoch, parts))
        step = Step()
        req = AddRequest(
            next(self._tokens),
            transactional_id,
            producer_id,
            producer_epoch,
            parts,
            transaction_version,
        )
        outcome = self._try_add(req, now_ms, step, may_block=self.blocking_begin)
        step.reply = Pending(req.token) if outcome is None else outcome
        return step

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        now_ms: int,
        transaction_version: int = TV_0,
    ) -> Step:
        """AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition (TxnOffsetCommit
        v5 does it implicitly, with ``transaction_version=TV_2``)."""
        partition = (CONSUMER_OFFSETS_TOPIC, self.offsets_partition(group_id))
        return self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [partition],
            now_ms=now_ms,
            transaction_version=transaction_version,
        )

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        transaction_version: int = TV_0,
    ) -> Step:
        early = self._precheck(transactional_id)
        if early is not None:
            return Step(reply=early)
        meta = self._txns.get(transactional_id)
        decision: Reply | TransactionMetadata
        if supports_epoch_bump(transaction_version):
            decision = end_txn_tv2(
                meta, producer_id, producer_epoch, commit, now_ms, self.allocate_producer_id
            )
        else:
            err = self._check_producer(meta, producer_id, producer_epoch)
            if err is not None:
                return Step(reply=Reply(err))
            assert meta is not None
            decision = end_txn_tv1(meta, commit, now_ms)
        if isinstance(decision, Reply):
            return Step(reply=decision)
        assert meta is not None
        return self._request_step(meta, _Kind.END, decision)

    def verify_partition(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partition: TopicPartition,
    ) -> ErrorCode:
        """May a transactional write of this producer for ``partition`` land now (KIP-890
        part 1 for Produce; KIP-98's check for TxnOffsetCommit on the group's offsets
        partition)? Only if its transaction is Ongoing and holds the partition."""
        unavailable = self._unavailable(transactional_id)
        if unavailable is not None:
            return unavailable
        meta = self._txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, producer_epoch)
        if err is not None:
            return err
        assert meta is not None
        if meta.state is not S.ONGOING or partition not in meta.partitions:
            return E.invalid_txn_state
        if meta.kept_identity is not None:
            return E.invalid_txn_state  # a kept 2PC transaction takes no more writes
        return E.none

    def cancel(self, token: int) -> Reply | None:
        """Give up on a request parked by ``blocking_begin``: it gets CONCURRENT_TRANSACTIONS
        (the client retries). Returns ``None`` if the token is not parked (already answered,
        or waiting on a log append, whose completion will still answer it)."""
        return Reply(E.concurrent_transactions) if self._parked.cancel(token) else None

    # -- feedback from the shell -----------------------------------------------------------

    def on_log_appended(
        self, transactional_id: str, *, now_ms: int, error: ErrorCode = E.none
    ) -> Step:
        transit = self._transits.get(transactional_id)
        if transit is None or transit.awaiting_markers:
            raise CoordinatorProtocolError(f"no log append outstanding for {transactional_id!r}")
        meta = self._txns[transactional_id]
        step = Step()
        if error is not E.none:
            if transit.kind is _Kind.COMPLETE:
                # The outcome is decided and the markers are written: only retrying is
                # left, after a back-off (Step.retry).
                step.retry.append(self._append_action(transit.target))
                return step
            del self._transits[transactional_id]
            meta.cancel_pending()
            if transit.kind is _Kind.FENCE:
                # Keep the fenced producer out even though the bump is not durable (as Kafka).
                meta.producer_epoch = transit.target.producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
                meta.has_failed_epoch_fence = True
            if transit.token is not None:
                step.resolved.append((transit.token, Reply(client_error(error))))
            self._drain(transactional_id, now_ms, step)
            return step
        del self._transits[transactional_id]
        if transit.kind is _Kind.DEAD:
            del self._txns[transactional_id]
        else:
            meta.complete(transit.target)
        if transit.token is not None:
            if transit.kind is _Kind.INIT:
                reply = init_reply(meta)
            elif transit.kind is _Kind.FENCE:
                reply = Reply(E.concurrent_transactions)
            elif transit.kind is _Kind.END and supports_epoch_bump(meta.client_transaction_version):
                # EndTxn v5: the producer id and epoch of the producer's next transaction.
                reply = Reply(E.none, *next_identity(meta))
            else:
                reply = Reply(E.none)
            step.resolved.append((transit.token, reply))
        if transit.kind in (_Kind.END, _Kind.FENCE):
            self._start_completion(meta, now_ms, step)
        self._drain(transactional_id, now_ms, step)
        return step

    def on_markers_written(self, transactional_id: str, *, now_ms: int) -> Step:
        transit = self._transits.get(transactional_id)
        if transit is None or not transit.awaiting_markers:
            raise CoordinatorProtocolError(f"no markers outstanding for {transactional_id!r}")
        transit.awaiting_markers = False
        transit.target.txn_last_update_ms = max(transit.target.txn_last_update_ms, now_ms)
        return Step(appends=[self._append_action(transit.target)])

    # -- timers and recovery ---------------------------------------------------------------

    def expire(self, now_ms: int) -> Step:
        """Both periodic jobs: abort timed-out transactions, then expire idle ids."""
        step = self.abort_timed_out(now_ms)
        step.appends.extend(self.expire_transactional_ids(now_ms).appends)
        return step

    def abort_timed_out(self, now_ms: int) -> Step:
        """Ongoing past ``txn_start_ms + txn_timeout_ms``: abort under a bumped epoch, which
        fences the late producer (its EndTxn/AddPartitions get PRODUCER_FENCED)."""
        step = Step()
        for meta in list(self._txns.values()):
            if (
                meta.state is S.ONGOING
                and meta.pending_state is None
                and not meta.is_two_phase_commit  # KIP-939: only its producer ends it
                and meta.txn_start_ms + meta.txn_timeout_ms < now_ms
            ):
                self._begin(meta, _Kind.FENCE, self._fence_target(meta, now_ms), None, step)
        return step

    def expire_transactional_ids(self, now_ms: int) -> Step:
        """Idle ids not updated for ``id_expiration_ms``: write a tombstone, then forget them."""
        step = Step()
        for txn_id, meta in list(self._txns.items()):
            if (
                meta.pending_state is None
                and meta.state.expiration_allowed
                and meta.txn_last_update_ms <= now_ms - self.id_expiration_ms
            ):
                if meta.producer_epoch == NO_PRODUCER_EPOCH:
                    del self._txns[txn_id]  # its first record never became durable
                    continue
                target = meta.prepare(S.DEAD, partitions=set())
                self._transits[txn_id] = _Transit(_Kind.DEAD, target, None)
                step.appends.append(
                    Append(
                        self.txn_log_partition(txn_id),
                        ((encode_key(txn_id), None),),
                        owner=txn_id,
                    )
                )
        return step

    def load(
        self, records: Iterable[tuple[str | bytes, bytes | None]], *, now_ms: int | None = None
    ) -> Step:
        """Replay the whole of ``__transaction_state`` at once (every partition); see
        ``load_partition``."""
        if self._loaded:
            raise CoordinatorProtocolError("load() may be called only once")
        step = self._replay(records, now_ms)
        self._loaded = set(range(self.txn_log_partitions))
        self._failed.clear()
        return step

    def load_partition(
        self,
        partition: int,
        records: Iterable[tuple[str | bytes, bytes | None]],
        *,
        now_ms: int | None = None,
    ) -> Step:
        """Replay one ``__transaction_state`` partition's (key, value) records in offset
        order; its ids are served from now on."""
        if partition in self._loaded:
            raise CoordinatorProtocolError(f"partition {partition} is loaded already")
        step = self._replay(records, now_ms)
        self._loaded.add(partition)
        self._failed.discard(partition)
        return step

    def mark_loading(self, partition: int) -> None:
        """``partition`` loads (again): its ids get COORDINATOR_LOAD_IN_PROGRESS."""
        self._failed.discard(partition)

    def mark_failed(self, partition: int) -> None:
        """The load of ``partition`` failed: its ids get NOT_COORDINATOR."""
        self._failed.add(partition)

    def _replay(
        self, records: Iterable[tuple[str | bytes, bytes | None]], now_ms: int | None
    ) -> Step:
        """The last value per key wins and ``None`` is a tombstone. Prepared transactions
        get their markers re-sent; Ongoing ones stay open and will time out unless their
        producer finishes them. Nothing is applied if a record is refused."""
        latest: dict[str, bytes | None] = {}
        for key, value in records:
            txn_id = key if isinstance(key, str) else decode_key(key)
            latest[txn_id] = value
        metas: list[TransactionMetadata] = []
        for txn_id, value in latest.items():
            if value is None:
                continue
            meta = decode_value(txn_id, value)
            if meta.state is S.DEAD:
                continue
            if meta.state is S.PREPARE_EPOCH_FENCE:
                raise TxnStateError(f"{txn_id}: PrepareEpochFence is never logged")
            metas.append(meta)
        step = Step()
        for meta in metas:
            self._txns[meta.transactional_id] = meta
            if meta.state.is_prepare:
                when = meta.txn_last_update_ms if now_ms is None else now_ms
                self._start_completion(meta, when, step)
        return step

    # -- introspection ---------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        meta = self._txns.get(transactional_id)
        return None if meta is None else meta.copy()

    def list(
        self,
        states: Iterable[TxnState | str] | None = None,
        producer_ids: Iterable[int] | None = None,
        min_duration_ms: int | None = None,
        *,
        now_ms: int | None = None,
    ) -> builtins.list[TransactionMetadata]:
        """ListTransactions; see ``metadata.select`` for the filters."""
        metas = (self._txns[txn_id] for txn_id in sorted(self._txns))
        return [m.copy() for m in select(metas, states, producer_ids, min_duration_ms, now_ms)]

    @property
    def num_transactional_ids(self) -> int:
        return len(self._txns)

    @property
    def num_ongoing(self) -> int:
        """Transactions that hold back the LSO somewhere: Ongoing or awaiting markers."""
        return sum(1 for m in self._txns.values() if m.state is S.ONGOING or m.state.is_prepare)

    @property
    def num_parked(self) -> int:
        return len(self._parked)

    # -- internals -------------------------------------------------------------------------

    def _unavailable(self, transactional_id: str) -> ErrorCode | None:
        """The error for an id whose partition is not loaded (None: it is)."""
        partition = self.txn_log_partition(transactional_id)
        if partition in self._loaded:
            return None
        return E.not_coordinator if partition in self._failed else E.coordinator_load_in_progress

    def _precheck(self, transactional_id: str) -> Reply | None:
        unavailable = self._unavailable(transactional_id)
        if unavailable is not None:
            return Reply(unavailable)
        if not transactional_id:
            return Reply(E.invalid_request)
        return None

    @staticmethod
    def _check_producer(
        meta: TransactionMetadata | None, producer_id: int, producer_epoch: int
    ) -> ErrorCode | None:
        if meta is None:
            return E.invalid_producer_id_mapping
        current_pid, current_epoch = client_identity(meta)
        if current_pid != producer_id:
            return E.invalid_producer_id_mapping
        if meta.producer_epoch == NO_PRODUCER_EPOCH:
            return E.invalid_producer_id_mapping  # never initialised successfully
        if current_epoch != producer_epoch:
            return E.producer_fenced
        return None

    def _verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        parts: frozenset[TopicPartition],
    ) -> Reply:
        # KIP-890 part 1: a partition leader asks whether the partitions are in the
        # transaction before accepting its first transactional batch. No state change.
        meta = self._txns.get(transactional_id)
        err = self._check_producer(meta, producer_id, producer_epoch)
        if err is None and meta is not None and meta.state.is_prepare:
            err = E.concurrent_transactions
        if err is None and meta is not None and meta.kept_identity is not None:
            err = E.invalid_txn_state  # a kept 2PC transaction takes no more partitions
        if err is not None:
            return Reply(err, partition_errors=dict.fromkeys(parts, err))
        assert meta is not None
        return Reply(
            E.none,
            partition_errors={
                p: E.none if p in meta.partitions else E.transaction_abortable for p in parts
            },
        )

    def _try_add(
        self, req: AddRequest, now_ms: int, step: Step, *, may_block: bool
    ) -> Reply | None:
        """A final Reply, or None when the request is now pending (appending or parked)."""
        meta = self._txns.get(req.transactional_id)
        if (
            may_block
            and meta is not None
            and meta.state.is_prepare
            and (req.producer_id, req.producer_epoch) == next_identity(meta)
        ):
            # A TV2 producer starts its next transaction while the markers of the previous
            # one (which handed it this id and epoch) are still being written.
            self._parked.park(req)
            return None
        err = self._check_producer(meta, req.producer_id, req.producer_epoch)
        if err is not None:
            return Reply(err)
        assert meta is not None
        if meta.pending_state is not None or meta.state.is_prepare:
            if may_block and meta.state.is_prepare:
                self._parked.park(req)  # re-run by _drain once the transaction is complete
                return None
            return Reply(E.concurrent_transactions)
        if meta.kept_identity is not None:
            return Reply(E.invalid_txn_state)  # a kept 2PC transaction takes no more partitions
        if meta.state is S.ONGOING and req.partitions <= meta.partitions:
            return Reply(E.none)
        target = meta.prepare(
            S.ONGOING,
            partitions=meta.partitions | req.partitions,
            txn_start_ms=meta.txn_start_ms if meta.state is S.ONGOING else now_ms,
            txn_last_update_ms=now_ms,
            client_transaction_version=req.transaction_version,
        )
        self._begin(meta, _Kind.ADD, target, req.token, step)
        return None

    def _drain(self, transactional_id: str, now_ms: int, step: Step) -> None:
        """Re-run parked requests, in arrival order, once the id is free again."""
        while self._parked.has(transactional_id):
            meta = self._txns.get(transactional_id)
            if meta is not None and (meta.pending_state is not None or meta.state.is_prepare):
                return
            req = self._parked.pop(transactional_id)
            assert req is not None
            outcome = self._try_add(req, now_ms, step, may_block=False)
            if outcome is None:
                return  # it started an append; the rest wait for that to finish
            step.resolved.append((req.token, outcome))

    def _fence_target(self, meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
        # Kafka's PrepareEpochFence -> PrepareAbort collapsed into one transition (the fence
        # state is never logged). After a failed fence write the epoch is already bumped.
        bump = not meta.has_failed_epoch_fence and meta.producer_epoch < MAX_EPOCH
        if meta.kept_identity is not None:
            # A kept 2PC transaction: the markers go one above the transaction's epoch (the
            # kept identity is ahead of it); the kept identity's successor takes over.
            next_pid, next_epoch = successor(*meta.kept_identity, self.allocate_producer_id)
            return meta.prepare(
                S.PREPARE_ABORT,
                producer_epoch=meta.producer_epoch + 1 if bump else meta.producer_epoch,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                next_producer_id=next_pid,
                next_producer_epoch=next_epoch,
                txn_last_update_ms=now_ms,
            )
        epoch = meta.producer_epoch + 1 if bump else meta.producer_epoch
        last_epoch = NO_PRODUCER_EPOCH
        if supports_epoch_bump(meta.client_transaction_version) and epoch < MAX_EPOCH:
            # A TV2 transaction's abort bumps once more, as every TV2 end does, so the
            # fenced producer's EndTxn (its epoch + 1 would look like a retry) is fenced.
            epoch, last_epoch = epoch + 1, epoch
        return meta.prepare(
            S.PREPARE_ABORT,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            txn_last_update_ms=now_ms,
        )

    def _start_completion(self, meta: TransactionMetadata, now_ms: int, step: Step) -> None:
        commit = meta.state is S.PREPARE_COMMIT
        pid, epoch = next_identity(meta)
        target = meta.prepare(
            S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
            producer_id=pid,
            producer_epoch=epoch,
            next_producer_id=NO_PRODUCER_ID,
            next_producer_epoch=NO_PRODUCER_EPOCH,
            partitions=set(),
            txn_last_update_ms=max(now_ms, meta.txn_last_update_ms),
        )
        transit = _Transit(_Kind.COMPLETE, target, None)
        self._transits[meta.transactional_id] = transit
        if meta.partitions:
            transit.awaiting_markers = True
            step.effects.append(
                WriteMarkers(
                    meta.transactional_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    commit,
                    frozenset(meta.partitions),
                    self.coordinator_epoch,
                )
            )
        else:
            step.appends.append(self._append_action(target))

    def _request_step(
        self, meta: TransactionMetadata, kind: _Kind, target: TransactionMetadata
    ) -> Step:
        """A request answered once ``target`` is durable."""
        token = next(self._tokens)
        step = Step(reply=Pending(token))
        self._begin(meta, kind, target, token, step)
        return step

    def _begin(
        self,
        meta: TransactionMetadata,
        kind: _Kind,
        target: TransactionMetadata,
        token: int | None,
        step: Step,
    ) -> None:
        self._transits[meta.transactional_id] = _Transit(kind, target, token)
        step.appends.append(self._append_action(target))

    def _append_action(self, target: TransactionMetadata) -> Append:
        txn_id = target.transactional_id
        record = (encode_key(txn_id), encode_value(target))
        return Append(self.txn_log_partition(txn_id), (record,), owner=txn_id, label=target.state)
