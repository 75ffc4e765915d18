"""Two-phase commit (KIP-939) in the pure coordinator: InitProducerId enable2Pc and
keepPreparedTxn, after the 2PC cases of Kafka's TransactionCoordinatorTest (a transaction
with no timeout, a kept transaction answered with the kept identity and the ongoing one,
EndTxn with the kept identity, repeated keeps, producer id rotation) plus the error cases."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.coordinator.runtime import Append
from oncelog.txn.config import TxnConfig
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.log_codec import decode_value, encode_key, encode_value
from oncelog.txn.messages import Reply, WriteMarkers
from oncelog.txn.metadata import MAX_EPOCH, TV_2, TWO_PC_TIMEOUT_MS, TxnState
from tests.unit.test_txn_coordinator import P0, P1, TXN, Shell, err, ok
from tests.unit.test_txn_coordinator_tv2 import add2, end2

E = ErrorCode
S = TxnState


def shell(**kw: Any) -> Shell:
    return Shell(two_phase_commit_enable=True, **kw)


def init2(sh: Shell, *, keep: bool = False, timeout: int = 60_000, **kw: Any) -> Reply:
    r = sh.request("init_producer_id", TXN, timeout, enable_2pc=True, keep_prepared_txn=keep, **kw)
    assert isinstance(r, Reply)
    return r


def kept(pid: int, epoch: int, ongoing_pid: int, ongoing_epoch: int) -> Reply:
    return Reply(
        E.none,
        pid,
        epoch,
        ongoing_producer_id=ongoing_pid,
        ongoing_producer_epoch=ongoing_epoch,
    )


def open_2pc(sh: Shell, parts: Any = (P0, P1)) -> tuple[int, int]:
    """A 2PC producer that wrote to ``parts`` and then "crashed" (prepared, never ended)."""
    r = init2(sh)
    assert add2(sh, r.producer_id, r.producer_epoch, parts) == ok()
    return r.producer_id, r.producer_epoch


def test_enable_2pc_needs_the_broker_setting() -> None:
    sh = Shell()  # transaction.two.phase.commit.enable=false (Kafka's default)
    assert sh.probe("init_producer_id", TXN, 60_000, enable_2pc=True) == err(
        E.transactional_id_authorization_failed
    )
    assert sh.probe(
        "init_producer_id", TXN, 60_000, enable_2pc=True, keep_prepared_txn=True
    ) == err(E.transactional_id_authorization_failed)
    assert sh.coord.describe(TXN) is None
    assert sh.init() == ok(1000, 0)  # without 2PC nothing changes


def test_keep_prepared_needs_enable_2pc() -> None:
    sh = shell()
    assert sh.probe("init_producer_id", TXN, 60_000, keep_prepared_txn=True) == err(
        E.invalid_request
    )


def test_keep_prepared_with_an_expected_producer_is_an_invalid_request() -> None:
    # Kafka's TransactionCoordinatorTest.shouldRejectKeepPreparedTxnWithExpectedEpoch.
    sh = shell()
    pid, epoch = open_2pc(sh)
    assert sh.probe(
        "init_producer_id",
        TXN,
        60_000,
        pid,
        epoch,
        enable_2pc=True,
        keep_prepared_txn=True,
    ) == err(E.invalid_request)
    assert sh.state().state is S.ONGOING and sh.state().producer_epoch == epoch


def test_a_2pc_transaction_has_no_timeout_and_is_never_aborted_by_it() -> None:
    sh = shell(max_timeout_ms=1_000)
    # The request's timeout is ignored (even one above the maximum), as Kafka does.
    assert init2(sh, timeout=5_000_000) == ok(1000, 0)
    assert sh.state().txn_timeout_ms == TWO_PC_TIMEOUT_MS
    assert add2(sh, 1000, 0) == ok()
    sh.now += 10 * 24 * 3600 * 1000
    assert sh.absorb(sh.coord.expire(sh.now)) is None
    assert not sh.queue
    assert (sh.state().state, sh.state().producer_epoch) == (S.ONGOING, 0)
    # The timeout is persisted with the record: it is the only mark of a 2PC transaction.
    logged = decode_value(TXN, sh.log[-1][1] or b"")
    assert logged.is_two_phase_commit and logged.state is S.ONGOING


def test_keep_prepared_returns_the_kept_and_the_ongoing_identity() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    assert init2(sh, keep=True) == kept(pid, epoch + 1, pid, epoch)
    m = sh.state()
    assert (m.state, m.producer_id, m.producer_epoch, m.partitions) == (
        S.ONGOING,
        pid,
        epoch,
        {P0, P1},
    )
    assert m.kept_identity == (pid, epoch + 1)
    # The kept identity is in the log (Kafka's NextProducerId/NextProducerEpoch).
    logged = decode_value(TXN, sh.log[-1][1] or b"")
    assert (logged.next_producer_id, logged.next_producer_epoch) == (pid, epoch + 1)
    # Keeping again hands out the next epoch; the ongoing identity stays.
    assert init2(sh, keep=True) == kept(pid, epoch + 2, pid, epoch)


def test_the_crashed_producer_is_fenced_and_the_kept_one_cannot_add() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    init2(sh, keep=True)
    assert add2(sh, pid, epoch, (P0,)) == err(E.producer_fenced)
    assert sh.coord.verify_partition(TXN, pid, epoch, P0) == E.producer_fenced
    assert end2(sh, pid, epoch) == err(E.producer_fenced)
    assert sh.request("end_txn", TXN, pid, epoch, True) == err(E.producer_fenced)
    # The prepared transaction takes no more writes, not even from the kept identity.
    assert add2(sh, pid, epoch + 1, (P0,)) == err(E.invalid_txn_state)
    assert sh.coord.verify_partition(TXN, pid, epoch + 1, P0) == E.invalid_txn_state
    assert sh.state().partitions == {P0, P1}


def test_end_txn_v5_with_the_kept_identity_commits_it() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    init2(sh, keep=True)
    init2(sh, keep=True)  # the latest kept epoch is epoch + 2
    assert end2(sh, pid, epoch + 1) == err(E.producer_fenced)
    start = len(sh.trace)
    # The reply is the kept identity's successor, as for any TV2 EndTxn.
    assert end2(sh, pid, epoch + 2, commit=True) == ok(pid, epoch + 3)
    prepare = sh.trace[start]
    assert isinstance(prepare, Append) and prepare.label is S.PREPARE_COMMIT
    # The markers carry the transaction's epoch + 1 (above every record it wrote).
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_id, m.producer_epoch, m.commit, sorted(m.partitions)) for m in markers] == [
        (pid, epoch + 1, True, [P0, P1])
    ]
    m = sh.state()
    assert (m.state, m.producer_id, m.producer_epoch, m.kept_identity) == (
        S.COMPLETE_COMMIT,
        pid,
        epoch + 3,
        None,
    )
    # A retry of that EndTxn succeeds without another bump; the producer goes on.
    assert end2(sh, pid, epoch + 2, commit=True) == ok(pid, epoch + 3)
    assert add2(sh, pid, epoch + 3) == ok()
    assert end2(sh, pid, epoch + 3, commit=False) == ok(pid, epoch + 4)


def test_end_txn_v5_with_the_kept_identity_aborts_it() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh, (P0,))
    init2(sh, keep=True)
    start = len(sh.trace)
    assert end2(sh, pid, epoch + 1, commit=False) == ok(pid, epoch + 2)
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_epoch, m.commit) for m in markers] == [(epoch + 1, False)]
    assert (sh.state().state, sh.state().producer_epoch) == (S.COMPLETE_ABORT, epoch + 2)


def test_tv1_end_txn_with_the_kept_identity() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    init2(sh, keep=True)
    start = len(sh.trace)
    assert sh.request("end_txn", TXN, pid, epoch + 1, True) == ok()
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_epoch, m.commit) for m in markers] == [(epoch, True)]
    m = sh.state()
    # TV1 does not bump: the kept identity simply takes over.
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, pid, epoch + 1)
    assert sh.request("end_txn", TXN, pid, epoch + 1, True) == ok()  # a retry


def test_keep_prepared_without_an_open_transaction_is_a_plain_init() -> None:
    sh = shell()
    assert init2(sh, keep=True) == ok(1000, 0)
    pid, epoch = 1000, 0
    assert add2(sh, pid, epoch) == ok()
    assert end2(sh, pid, epoch) == ok(pid, epoch + 1)
    assert init2(sh, keep=True) == ok(pid, epoch + 2)


def test_keep_prepared_of_a_transaction_opened_without_2pc_is_refused() -> None:
    sh = shell()
    r = sh.init()
    assert add2(sh, r.producer_id, r.producer_epoch) == ok()
    assert sh.probe("init_producer_id", TXN, 60_000, enable_2pc=True, keep_prepared_txn=True) == (
        err(E.invalid_txn_state)
    )
    assert sh.state().state is S.ONGOING


def test_init_without_keep_aborts_a_kept_transaction() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    init2(sh, keep=True)
    start = len(sh.trace)
    # keepPreparedTxn=false is how an operator (or a new session) gives up on it.
    assert init2(sh) == err(E.concurrent_transactions)
    markers = [a for a in sh.trace[start:] if isinstance(a, WriteMarkers)]
    assert [(m.producer_epoch, m.commit) for m in markers] == [(epoch + 1, False)]
    assert (sh.state().state, sh.state().producer_epoch) == (S.COMPLETE_ABORT, epoch + 2)
    assert init2(sh) == ok(pid, epoch + 3)
    assert end2(sh, pid, epoch + 1) == err(E.producer_fenced)


def test_kept_identity_rotates_the_producer_id_at_an_exhausted_epoch() -> None:
    sh = shell()
    pid, _ = open_2pc(sh)
    start_epoch = MAX_EPOCH - 3
    sh.coord._txns[TXN].producer_epoch = start_epoch  # the transaction's epoch, as if reached
    assert init2(sh, keep=True) == kept(pid, MAX_EPOCH - 2, pid, start_epoch)
    assert init2(sh, keep=True) == kept(pid, MAX_EPOCH - 1, pid, start_epoch)
    # MAX_EPOCH - 1 is exhausted: a new producer id at epoch 0; the ongoing one stays.
    assert init2(sh, keep=True) == kept(1001, 0, pid, start_epoch)
    assert add2(sh, pid, start_epoch) == err(E.invalid_producer_id_mapping)
    assert end2(sh, 1001, 0) == ok(1001, 1)
    m = sh.state()
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, 1001, 1)


def test_a_kept_transaction_survives_a_restart() -> None:
    sh = shell()
    pid, epoch = open_2pc(sh)
    init2(sh, keep=True)
    fresh = TransactionCoordinator(
        allocate_producer_id=lambda: 2000, config=TxnConfig(two_phase_commit_enable=True)
    )
    step = fresh.load(sh.log, now_ms=sh.now)
    assert not step.appends and not step.effects  # Ongoing stays open, nothing to resend
    m = fresh.describe(TXN)
    assert m is not None
    assert (m.state, m.producer_epoch, m.kept_identity, m.partitions) == (
        S.ONGOING,
        epoch,
        (pid, epoch + 1),
        {P0, P1},
    )
    assert fresh.abort_timed_out(sh.now + 10**12).appends == []
    s = fresh.end_txn(TXN, pid, epoch + 1, True, now_ms=sh.now, transaction_version=TV_2)
    assert [a.label for a in s.appends] == [S.PREPARE_COMMIT]


def test_kept_identity_round_trips_the_log_codec() -> None:
    sh = shell()
    open_2pc(sh)
    init2(sh, keep=True)
    m = sh.state()
    assert encode_key(TXN) == sh.log[-1][0]
    assert decode_value(TXN, encode_value(m)) == m
