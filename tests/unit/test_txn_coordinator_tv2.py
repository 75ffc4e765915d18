"""Transaction version 2 (KIP-890 part 2) in the pure coordinator, after the TV2 cases of
Kafka's TransactionCoordinatorTest: an epoch bump on every EndTxn, retries with the previous
epoch, aborts with nothing added, and the producer id rotation on epoch overflow."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.coordinator.runtime import Append, Pending
from oncelog.txn.log_codec import decode_value, encode_key, encode_value
from oncelog.txn.messages import Reply, WriteMarkers
from oncelog.txn.metadata import MAX_EPOCH, TV_2, TransactionMetadata, TxnState
from tests.unit.test_txn_coordinator import P0, P1, TXN, Shell, err, kinds, ok

E = ErrorCode
S = TxnState


def add2(sh: Shell, pid: int, epoch: int, parts: Any = (P0,), **kw: Any) -> Reply | Pending:
    """The implicit add of Produce v12 / TxnOffsetCommit v5."""
    return sh.request("add_partitions", TXN, pid, epoch, parts, transaction_version=TV_2, **kw)


def end2(sh: Shell, pid: int, epoch: int, commit: bool = True, **kw: Any) -> Reply | Pending:
    return sh.request("end_txn", TXN, pid, epoch, commit, transaction_version=TV_2, **kw)


def test_commit_and_abort_bump_the_epoch_and_reply_with_it() -> None:
    sh = Shell()
    r = sh.init()
    assert r == ok(1000, 0)
    assert add2(sh, 1000, 0) == ok()
    start = len(sh.trace)
    assert end2(sh, 1000, 0, commit=True) == ok(1000, 1)
    # PrepareCommit already holds the bumped epoch, and so do the markers.
    prepare = sh.trace[start]
    assert isinstance(prepare, Append) and prepare.label is S.PREPARE_COMMIT
    logged = decode_value(TXN, prepare.records[0][1] or b"")
    assert (logged.producer_epoch, logged.last_producer_epoch) == (1, 0)
    assert logged.client_transaction_version == TV_2
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_id, m.producer_epoch, m.commit) for m in markers] == [(1000, 1, True)]
    m = sh.state()
    assert (m.state, m.producer_id, m.producer_epoch, m.last_producer_epoch) == (
        S.COMPLETE_COMMIT,
        1000,
        1,
        0,
    )
    assert add2(sh, 1000, 1, (P1,)) == ok()
    assert end2(sh, 1000, 1, commit=False) == ok(1000, 2)
    assert (sh.state().state, sh.state().producer_epoch) == (S.COMPLETE_ABORT, 2)


def test_the_old_epoch_is_fenced_after_the_bump() -> None:
    sh = Shell()
    sh.init()
    add2(sh, 1000, 0)
    end2(sh, 1000, 0)
    # A zombie (or a delayed request) of the finished transaction cannot open a new one.
    assert add2(sh, 1000, 0) == err(E.producer_fenced)
    assert sh.request("add_partitions", TXN, 1000, 0, [P0]) == err(E.producer_fenced)
    assert sh.coord.verify_partition(TXN, 1000, 0, P0) == E.producer_fenced
    add2(sh, 1000, 1)
    assert end2(sh, 1000, 0) == err(E.producer_fenced)  # Ongoing wants the same epoch
    assert end2(sh, 1000, 2) == err(E.producer_fenced)
    assert end2(sh, 999, 1) == err(E.invalid_producer_id_mapping)
    assert end2(sh, 1000, 1) == ok(1000, 2)


def test_retries_with_the_previous_epoch() -> None:
    sh = Shell()
    sh.init()
    add2(sh, 1000, 0)
    # During PrepareCommit a retry (epoch + 1 stored) is told to wait.
    pending = end2(sh, 1000, 0, run=False)
    assert isinstance(pending, Pending)
    sh.perform_one()  # PrepareCommit durable: the reply goes out, markers start
    assert sh.replies.pop(pending.token) == ok(1000, 1)
    assert sh.probe("end_txn", TXN, 1000, 0, True, transaction_version=TV_2) == err(
        E.concurrent_transactions
    )
    assert sh.probe("end_txn", TXN, 1000, 0, False, transaction_version=TV_2) == err(
        E.concurrent_transactions  # Kafka checks the pending transition before the state
    )
    sh.drain()
    # CompleteCommit: the retry succeeds without another bump; the opposite result fails.
    assert sh.probe("end_txn", TXN, 1000, 0, True, transaction_version=TV_2) == ok(1000, 1)
    assert sh.probe("end_txn", TXN, 1000, 0, False, transaction_version=TV_2) == err(
        E.invalid_txn_state
    )
    # The current epoch: a commit with nothing open is invalid, an abort bumps.
    assert sh.probe("end_txn", TXN, 1000, 1, True, transaction_version=TV_2) == err(
        E.invalid_txn_state
    )
    assert end2(sh, 1000, 1, commit=False) == ok(1000, 2)
    assert sh.state().state is S.COMPLETE_ABORT
    assert sh.probe("end_txn", TXN, 1000, 1, False, transaction_version=TV_2) == ok(1000, 2)
    assert sh.probe("end_txn", TXN, 1000, 1, True, transaction_version=TV_2) == err(
        E.invalid_txn_state
    )
    assert sh.probe("end_txn", TXN, 1000, 0, False, transaction_version=TV_2) == err(
        E.producer_fenced
    )


def test_abort_with_nothing_added_bumps_from_empty() -> None:
    sh = Shell()
    sh.init()
    assert sh.probe("end_txn", TXN, 1000, 0, True, transaction_version=TV_2) == err(
        E.invalid_txn_state
    )
    # TV1 keeps Kafka 3.x's answer for the abort.
    assert sh.probe("end_txn", TXN, 1000, 0, False) == err(E.invalid_txn_state)
    start = len(sh.trace)
    assert end2(sh, 1000, 0, commit=False) == ok(1000, 1)
    # No partitions: no markers, PrepareAbort then CompleteAbort.
    assert kinds(sh.trace[start:]) == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    m = sh.state()
    assert (m.state, m.producer_epoch, m.partitions, m.txn_start_ms) == (
        S.COMPLETE_ABORT,
        1,
        set(),
        sh.now,
    )


def _at_epoch(sh: Shell, epoch: int, pid: int = 7) -> None:
    meta = TransactionMetadata(
        TXN,
        pid,
        last_producer_id=pid,
        producer_epoch=epoch,
        last_producer_epoch=epoch - 1,
        state=S.COMPLETE_COMMIT,
        txn_start_ms=1,
        txn_last_update_ms=1,
    )
    sh.absorb(sh.coord.load([(encode_key(TXN), encode_value(meta))]))


def test_epoch_overflow_rotates_the_producer_id() -> None:
    sh = Shell(load=False)
    _at_epoch(sh, MAX_EPOCH - 2)
    add2(sh, 7, MAX_EPOCH - 2)
    assert end2(sh, 7, MAX_EPOCH - 2) == ok(7, MAX_EPOCH - 1)  # not exhausted yet
    add2(sh, 7, MAX_EPOCH - 1, (P0, P1))
    start = len(sh.trace)
    pending = end2(sh, 7, MAX_EPOCH - 1, run=False)
    assert isinstance(pending, Pending)
    prepare = sh.perform_one()
    assert isinstance(prepare, Append)
    logged = decode_value(TXN, prepare.records[0][1] or b"")
    assert (logged.producer_id, logged.producer_epoch, logged.next_producer_id) == (
        7,
        MAX_EPOCH,
        1000,
    )
    # The client is handed the new producer id at epoch 0 ...
    assert sh.replies.pop(pending.token) == ok(1000, 0)
    sh.drain()
    # ... while the markers close the transaction under the old id at Short.MAX_VALUE.
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_id, m.producer_epoch) for m in markers] == [(7, MAX_EPOCH)]
    m = sh.state()
    assert (m.state, m.producer_id, m.producer_epoch, m.last_producer_id, m.next_producer_id) == (
        S.COMPLETE_COMMIT,
        1000,
        0,
        7,
        -1,
    )
    # A retry of the overflowing EndTxn names the old id: answered with the new one.
    assert sh.probe("end_txn", TXN, 7, MAX_EPOCH - 1, True, transaction_version=TV_2) == ok(1000, 0)
    assert sh.probe("end_txn", TXN, 7, MAX_EPOCH - 2, True, transaction_version=TV_2) == err(
        E.invalid_producer_id_mapping
    )
    assert add2(sh, 7, MAX_EPOCH - 1) == err(E.invalid_producer_id_mapping)
    assert add2(sh, 1000, 0) == ok()
    assert end2(sh, 1000, 0, commit=False) == ok(1000, 1)


def test_overflow_survives_a_restart_in_prepare_commit() -> None:
    sh = Shell(load=False)
    _at_epoch(sh, MAX_EPOCH - 1)
    add2(sh, 7, MAX_EPOCH - 1)
    end2(sh, 7, MAX_EPOCH - 1, run=False)
    sh.perform_one()  # PrepareCommit (with next_producer_id) is durable; markers not written
    log = list(sh.log)
    again = Shell(load=False)
    step = again.coord.load(log, now_ms=again.now)
    again.absorb(step)
    assert [
        (a.producer_id, a.producer_epoch) for a in again.queue if isinstance(a, WriteMarkers)
    ] == [(7, MAX_EPOCH)]
    again.drain()
    m = again.state()
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, 1000, 0)


def test_implicit_add_waits_behind_the_previous_transactions_markers() -> None:
    sh = Shell(blocking_begin=True)
    sh.init()
    add2(sh, 1000, 0)
    end2(sh, 1000, 0, run=False)
    sh.perform_one()  # PrepareCommit durable; markers outstanding
    # The producer already has epoch 1 and its next batch arrives: the add parks ...
    parked = sh.request("add_partitions", TXN, 1000, 1, [P1], transaction_version=TV_2, run=False)
    assert isinstance(parked, Pending) and sh.coord.num_parked == 1
    sh.drain()  # markers, CompleteCommit, then the parked add's Ongoing
    assert sh.replies.pop(parked.token) == ok()
    m = sh.state()
    assert (m.state, m.producer_epoch, m.partitions) == (S.ONGOING, 1, {P1})
    # ... while the old epoch is still refused at once.
    assert sh.request("add_partitions", TXN, 1000, 0, [P0], transaction_version=TV_2) == err(
        E.producer_fenced
    )


def test_tv2_fields_round_trip_as_kafkas_tagged_fields() -> None:
    """NextProducerId and ClientTransactionVersion are TransactionLogValue v1's tags 1 and
    2; a TV1 transaction leaves them out (their defaults), as Kafka does."""
    meta = TransactionMetadata(
        TXN,
        5,
        producer_epoch=MAX_EPOCH,
        state=S.PREPARE_ABORT,
        partitions={P0},
        txn_start_ms=3,
        txn_last_update_ms=4,
        next_producer_id=6,
        client_transaction_version=TV_2,
    )
    raw = encode_value(meta)
    assert raw[:2] == b"\x00\x01"
    assert decode_value(TXN, raw) == meta
    tv1 = TransactionMetadata(TXN, 5, producer_epoch=1, txn_start_ms=-1, txn_last_update_ms=4)
    assert decode_value(TXN, encode_value(tv1)) == tv1
    both_tags = dataclasses.replace(tv1, next_producer_id=6, client_transaction_version=TV_2)
    # tag 1 (1 + 1 + 8 bytes) and tag 2 (1 + 1 + 2 bytes) in the tagged-field section only
    assert len(encode_value(both_tags)) == len(encode_value(tv1)) + 14


def test_a_timed_out_tv2_transaction_fences_its_producer() -> None:
    # Kafka aborts a timed-out TV2 transaction with the fence bump and then the TV2 bump,
    # so the late producer's EndTxn is not mistaken for a retry of a finished one.
    sh = Shell(txn_log_partitions=1)
    sh.init(timeout=1_000)
    add2(sh, 1000, 0)
    sh.now += 5_000
    start = len(sh.trace)
    sh.absorb(sh.coord.abort_timed_out(sh.now))
    sh.drain()
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_epoch, m.commit) for m in markers] == [(2, False)]
    m = sh.state()
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.COMPLETE_ABORT, 2, 1)
    assert end2(sh, 1000, 0, commit=False) == err(E.producer_fenced)
    assert end2(sh, 1000, 0, commit=True) == err(E.producer_fenced)
    assert add2(sh, 1000, 0) == err(E.producer_fenced)
    # A new InitProducerId recovers the id.
    assert sh.init() == ok(1000, 3)
