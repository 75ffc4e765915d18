"""The driver side of the exactly-once sink: decide, then complete, then clean up.

``commit_batch`` runs in Spark's commit worker on the driver, possibly more than once for
the same batch and possibly in a fresh process after a crash. It is idempotent:

1. If the decision store already holds a decision for the batch, use it (roll forward).
   Otherwise check that every prepared task transaction is still open with enough lifetime
   left, and write the decision durably *before* committing anything.
2. EndTxn(commit) for every decided transaction. A retried commit of a completed
   transaction answers NONE; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH is resolved with
   DescribeTransactions (committed already: done; aborted by the coordinator: see below).
   A prepared two-phase-commit transaction (KIP-939: opened with InitProducerId v6
   enable2Pc, which only a broker with ``transaction.two.phase.commit.enable`` accepts) is
   completed by its own producer instead: InitProducerId keepPreparedTxn, then EndTxn with
   the identity that returns (``end_task_txn``). Any other transaction gets the EndTxn on
   the task producer's behalf, as before.
3. Abort leftovers: Ongoing transactions of this query that are not in the decision (dead
   or speculative task attempts), by fencing their ids (InitProducerId), so they never pin
   the last stable offset until ``transaction.timeout.ms``.

If the coordinator aborted decided transactions (they outlived ``transactionTimeoutMs``,
i.e. the driver was down longer than that between deciding and committing):

* none of the batch's transactions committed: the remaining ones are aborted, the decision
  is retracted and :class:`TransactionsTimedOut` is raised; after a restart the batch is
  recomputed and written again, exactly once;
* some committed: the batch is torn; the rest are committed and :class:`ExactlyOnceViolation`
  is raised, naming the batch, the lost transactions and the cause. It is raised again on
  every restart until an operator intervenes (docs/spark.md).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from pyspark.sql.datasource import WriterCommitMessage

from oncelog.client.transactions import TxnAdmin, is_two_phase
from oncelog.spark.decisions import (
    Decision,
    DecisionError,
    DecisionStore,
    Entry,
    SupersededDecision,
)
from oncelog.spark.hooks import point
from oncelog.spark.options import WriteOptions
from oncelog.spark.pool import pooled_decisions, pooled_txn_admin

log = logging.getLogger("oncelog.spark")

COMMITTED_STATES = ("CompleteCommit", "PrepareCommit")


class SinkError(RuntimeError):
    pass


class ExactlyOnceViolation(SinkError):
    """A decided micro-batch could not be committed completely: its output is torn."""


class TransactionsTimedOut(SinkError):
    """Prepared transactions timed out before the batch committed. Nothing of the batch is
    visible and it is not decided: restarting the query recomputes it exactly once."""


@dataclass
class OncelogCommitMessage(WriterCommitMessage):
    """What a write task hands to the driver's commit: its prepared transaction."""

    partition_id: int
    attempt: int
    records: int
    transactional_id: str | None = None  # None: no transaction (empty task, or at-least-once)
    producer_id: int = -1
    producer_epoch: int = -1
    query_id: str | None = None
    batch_id: int = -1
    skipped: bool = False  # the batch was already decided: nothing written (replay)


def transactional_id(prefix: str, query_id: str, partition_id: int, attempt: int) -> str:
    """The transactional id of a write task attempt of a streaming query."""
    return f"{prefix}-{query_id}-{partition_id}-{attempt}"


def _query_id(msgs: Sequence[OncelogCommitMessage]) -> str:
    ids = {m.query_id for m in msgs}
    if len(ids) != 1 or None in ids:
        raise SinkError(f"commit messages disagree on the query id: {sorted(map(str, ids))}")
    return str(ids.pop())


def is_committed(state: Any, pid: int, epoch: int) -> bool:
    # epoch + 1: Kafka's transaction version 2 (KIP-890) bumps the epoch on every commit.
    # A 2PC transaction completed by its own producer (keepPreparedTxn, then EndTxn v5) ends
    # at least two epochs further: the kept identity's bump, then EndTxn's.
    return (
        state is not None
        and state.transaction_state in COMMITTED_STATES
        and state.producer_id == pid
        and (
            state.producer_epoch in (epoch, epoch + 1)
            or (is_two_phase(state) and state.producer_epoch > epoch)
        )
    )


def is_open(state: Any, pid: int, epoch: int) -> bool:
    return (
        state is not None
        and state.transaction_state == "Ongoing"
        and (state.producer_id, state.producer_epoch) == (pid, epoch)
    )


def end_task_txn(
    txns: TxnAdmin, tid: str, pid: int, epoch: int, commit: bool, state: Any
) -> ErrorCode:
    """End a task's prepared transaction (``state``: its DescribeTransactions state). A
    two-phase-commit one (KIP-939) is ended by its own producer: InitProducerId
    keepPreparedTxn + EndTxn (INVALID_TXN_STATE when it is no longer open); any other one by
    EndTxn on the task producer's behalf. The caller judges a code other than NONE."""
    if is_two_phase(state):
        if not is_open(state, pid, epoch):
            return ErrorCode.invalid_txn_state
        return txns.complete_prepared(tid, pid, epoch, commit)
    return txns.end_txn(tid, pid, epoch, commit)


def _remaining(state: Any) -> datetime.timedelta:
    start = state.transaction_start_time
    if start is None:  # not started (-1): nothing can have run out
        return state.transaction_timeout  # type: ignore[no-any-return]
    return start + state.transaction_timeout - datetime.datetime.now(datetime.UTC)


def _describe_state(state: Any) -> str:
    if state is None:
        return "unknown to the coordinator"
    return (
        f"{state.transaction_state} (producer id {state.producer_id}, epoch {state.producer_epoch})"
    )


class BatchCommitter:
    def __init__(
        self, opts: WriteOptions, query_id: str, batch_id: int, txns: TxnAdmin, store: DecisionStore
    ) -> None:
        self.opts = opts
        self.prefix = opts.transactional_id_prefix
        self.query_id = query_id
        self.batch_id = batch_id
        self.txns = txns
        self.store = store

    def tid(self, entry: Entry) -> str:
        return transactional_id(self.prefix, self.query_id, entry[0], entry[1])

    @property
    def margin(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=min(30_000, self.opts.transaction_timeout_ms // 4))

    def check_prepared(self, entries: Sequence[Entry]) -> None:
        """Before deciding: every prepared transaction must still be open, with enough
        lifetime left to be committed. Otherwise fail the batch (nothing decided, nothing
        visible) so that it is recomputed."""
        if not entries:
            return
        states = self.txns.describe_many(self.tid(e) for e in entries)
        bad = []
        for e in entries:
            st = states.get(self.tid(e))
            if not is_open(st, e[2], e[3]):
                bad.append(f"{self.tid(e)}: {_describe_state(st)}")
            elif _remaining(st) < self.margin:
                bad.append(
                    f"{self.tid(e)}: only {_remaining(st).total_seconds():.1f} s before its transaction timeout"
                )
        if bad:
            self.abort_entries(entries, states)
            raise TransactionsTimedOut(
                f"batch {self.batch_id} was not committed: task transactions are no longer committable "
                f"({'; '.join(bad)}). The batch took longer than transactionTimeoutMs ({self.opts.transaction_timeout_ms} ms) "
                "allows, or a transaction was fenced. Nothing of it is visible; restart the query to recompute it "
                "(and raise transactionTimeoutMs if batches are this slow)."
            )

    def abort_entries(self, entries: Iterable[Entry], states: dict[str, Any] | None = None) -> None:
        entries = list(entries)
        if states is None:
            states = self.txns.describe_many(self.tid(e) for e in entries) if entries else {}
        for e in entries:
            tid = self.tid(e)
            code = end_task_txn(self.txns, tid, e[2], e[3], False, states.get(tid))
            if code != ErrorCode.none:
                log.info("abort of %s: %s (already ended)", self.tid(e), code.name)

    def roll_forward_check(self, decision: Decision) -> None:
        """After a restart: make sure every decided transaction is still committable (or
        committed) before committing any of them."""
        if not decision.entries:
            return
        states = self.txns.describe_many(self.tid(e) for e in decision.entries)
        if all(
            is_open(states.get(self.tid(e)), e[2], e[3])
            or is_committed(states.get(self.tid(e)), e[2], e[3])
            for e in decision.entries
        ):
            return
        self.salvage(decision, states)

    def complete(self, decision: Decision) -> None:
        states = (
            self.txns.describe_many(self.tid(e) for e in decision.entries)
            if decision.entries
            else {}
        )
        for i, e in enumerate(decision.entries):
            tid = self.tid(e)
            code = end_task_txn(self.txns, tid, e[2], e[3], True, states.get(tid))
            if code != ErrorCode.none:
                state = self.txns.describe_txn(tid)
                if not is_committed(state, e[2], e[3]):
                    log.error(
                        "EndTxn(commit) of %s failed with %s; the transaction is %s",
                        tid,
                        code.name,
                        _describe_state(state),
                    )
                    self.salvage(
                        decision, self.txns.describe_many(self.tid(x) for x in decision.entries)
                    )
            if i == 0:
                point("commit-mid-endtxn", self.batch_id)

    def salvage(self, decision: Decision, states: dict[str, Any]) -> None:
        """Some decided transactions were aborted by the coordinator. Never returns."""
        committed = [
            e for e in decision.entries if is_committed(states.get(self.tid(e)), e[2], e[3])
        ]
        live = [e for e in decision.entries if is_open(states.get(self.tid(e)), e[2], e[3])]
        lost = [e for e in decision.entries if e not in committed and e not in live]
        lost_text = ", ".join(
            f"{self.tid(e)} ({_describe_state(states.get(self.tid(e)))})" for e in lost
        )
        timeout = self.opts.transaction_timeout_ms
        if not committed:
            self.abort_entries(live, states)
            self.store.retract(self.batch_id)
            raise TransactionsTimedOut(
                f"batch {self.batch_id}: the coordinator aborted decided transactions {lost_text}, most likely because "
                f"the driver was down longer than transactionTimeoutMs ({timeout} ms) between deciding and committing the "
                f"batch. None of the batch's transactions was committed, so nothing of it is visible: the decision was "
                f"retracted. Restart the query: batch {self.batch_id} will be recomputed and written exactly once."
            )
        for e in live:
            tid = self.tid(e)
            end_task_txn(self.txns, tid, e[2], e[3], True, states.get(tid))
        raise ExactlyOnceViolation(
            f"EXACTLY-ONCE VIOLATION in batch {self.batch_id} of query {self.query_id}: the batch was decided and "
            f"{len(committed) + len(live)} of its {len(decision.entries)} task transactions are committed, but "
            f"{lost_text} were aborted by the transaction coordinator, so their records are MISSING from the output. "
            f"Likely cause: the driver died while committing batch {self.batch_id} and stayed down longer than "
            f"transactionTimeoutMs ({timeout} ms). The query cannot repair this by itself and will fail again on every "
            "restart; see 'Recovering from a torn batch' in docs/spark.md."
        )

    def cleanup(self, keep: set[str]) -> list[str]:
        return cleanup_leftovers(self.txns, f"{self.prefix}-{self.query_id}-", keep)


def cleanup_leftovers(txns: TxnAdmin, id_prefix: str, keep: set[str]) -> list[str]:
    """Abort (by fencing) every Ongoing transaction whose id starts with id_prefix and is not
    in keep: transactions of dead, failed or speculative task attempts."""
    aborted = []
    for t in txns.list_transactions(("Ongoing",)):
        if t.transactional_id.startswith(id_prefix) and t.transactional_id not in keep:
            txns.fence(t.transactional_id)
            aborted.append(t.transactional_id)
    if aborted:
        log.info("aborted %d leftover transaction(s): %s", len(aborted), ", ".join(aborted))
    return aborted


@contextmanager
def _committer(
    opts: WriteOptions, msgs: Sequence[OncelogCommitMessage], batch_id: int
) -> Iterator[BatchCommitter]:
    # Pooled: Spark keeps the commit worker for the whole query, so every micro-batch after
    # the first reuses the connections (and the coordinator look-ups) of the one before.
    query_id = _query_id(msgs)
    with (
        pooled_txn_admin(opts.client_config, TxnAdmin) as txns,
        pooled_decisions(
            opts.client_config, opts.transactional_id_prefix, query_id, DecisionStore
        ) as store,
    ):
        yield BatchCommitter(opts, query_id, batch_id, txns, store)


def commit_batch(
    opts: WriteOptions, messages: Sequence[OncelogCommitMessage | None], batch_id: int
) -> tuple[int, int]:
    """Commit a micro-batch; (transactions committed, leftover transactions aborted)."""
    msgs = [m for m in messages if m is not None]
    if not msgs:
        return 0, 0
    with _committer(opts, msgs, batch_id) as c:
        store = c.store
        try:
            decision = store.read(batch_id)
        except SupersededDecision as exc:
            log.warning("%s; nothing to commit", exc)
            return 0, 0
        if decision is None:
            skipped = [m.partition_id for m in msgs if m.skipped]
            if skipped:
                raise DecisionError(
                    f"tasks {skipped} of batch {batch_id} found it decided, but the decision store has no decision for it"
                )
            entries = [
                (m.partition_id, m.attempt, m.producer_id, m.producer_epoch)
                for m in msgs
                if m.transactional_id
            ]
            point("commit-before-decision", batch_id)
            c.check_prepared(entries)
            decision = store.write(batch_id, entries)
            point("commit-after-decision", batch_id)
        else:
            log.warning(
                "batch %d was decided before a restart: rolling its %d transaction(s) forward",
                batch_id,
                len(decision.entries),
            )
            c.roll_forward_check(decision)
        c.complete(decision)
        point("commit-after-endtxn", batch_id)
        aborted = c.cleanup({c.tid(e) for e in decision.entries})
        return len(decision.entries), len(aborted)


def abort_batch(
    opts: WriteOptions,
    messages: Sequence[OncelogCommitMessage | None],
    batch_id: int,
    query_id: str | None = None,
) -> int:
    """Abort an undecided batch at once: its tasks' transactions, and every other open
    transaction of the query (cancelled or failed tasks return no commit message, but their
    ids are deterministic). ``query_id`` is the fallback when no message names the query.
    Returns the number of transactions aborted."""
    msgs = [m for m in messages if m is not None]
    if msgs:
        query_id = _query_id(msgs)
    if query_id is None:
        log.warning(
            "batch %d aborted with no commit message and no readable checkpoint: its "
            "transactions are aborted when the query restarts or by transactionTimeoutMs (%d ms)",
            batch_id,
            opts.transaction_timeout_ms,
        )
        return 0
    with (
        TxnAdmin(opts.client_config) as txns,
        DecisionStore(opts.client_config, opts.transactional_id_prefix, query_id) as store,
    ):
        c = BatchCommitter(opts, query_id, batch_id, txns, store)
        try:
            decision = c.store.read(batch_id)
        except SupersededDecision:
            return 0
        if decision is not None:
            # Decided: its transactions must survive to be rolled forward when the batch is
            # replayed; only leftovers outside the decision go.
            log.warning(
                "batch %d is decided; its transactions stay prepared for the replay", batch_id
            )
            return len(c.cleanup({c.tid(e) for e in decision.entries}))
        c.abort_entries(
            [
                (m.partition_id, m.attempt, m.producer_id, m.producer_epoch)
                for m in msgs
                if m.transactional_id
            ]
        )
        aborted = c.cleanup(set())
        log.warning(
            "batch %d aborted: %d task transaction(s) aborted, %d more fenced",
            batch_id,
            sum(1 for m in msgs if m.transactional_id),
            len(aborted),
        )
        return sum(1 for m in msgs if m.transactional_id) + len(aborted)


# -- batch (non-streaming) writes -------------------------------------------------------------


def commit_job(
    opts: WriteOptions, messages: Sequence[OncelogCommitMessage | None], id_prefix: str
) -> None:
    msgs = [m for m in messages if m is not None and m.transactional_id]
    with TxnAdmin(opts.client_config) as txns:
        states = txns.describe_many(m.transactional_id for m in msgs if m.transactional_id)
        stale = [
            m.transactional_id
            for m in msgs
            if not is_open(states.get(m.transactional_id or ""), m.producer_id, m.producer_epoch)
        ]
        if stale:
            abort_job(opts, messages, id_prefix)
            raise SinkError(
                f"write job not committed: task transactions {stale} are no longer open (timed out or fenced); nothing was written"
            )
        for m in msgs:
            assert m.transactional_id is not None
            code = end_task_txn(
                txns,
                m.transactional_id,
                m.producer_id,
                m.producer_epoch,
                True,
                states.get(m.transactional_id),
            )
            if code != ErrorCode.none and not is_committed(
                txns.describe_txn(m.transactional_id), m.producer_id, m.producer_epoch
            ):
                raise SinkError(
                    f"commit of task transaction {m.transactional_id} failed: {code.name}; the job's output is partial"
                )
        cleanup_leftovers(txns, id_prefix, {m.transactional_id for m in msgs if m.transactional_id})


def abort_job(
    opts: WriteOptions, messages: Sequence[OncelogCommitMessage | None], id_prefix: str
) -> None:
    with TxnAdmin(opts.client_config) as txns:
        ours = [m for m in messages if m is not None and m.transactional_id]
        states = txns.describe_many(m.transactional_id for m in ours if m.transactional_id)
        for m in ours:
            assert m.transactional_id is not None
            end_task_txn(
                txns,
                m.transactional_id,
                m.producer_id,
                m.producer_epoch,
                False,
                states.get(m.transactional_id),
            )
        cleanup_leftovers(txns, id_prefix, set())
