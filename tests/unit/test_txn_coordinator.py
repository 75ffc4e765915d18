from __future__ import annotations

import itertools
from collections import deque
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.coordinator.placement import partition_for
from oncelog.coordinator.runtime import Append, Pending
from oncelog.txn.config import TxnConfig
from oncelog.txn.coordinator import CoordinatorProtocolError, TransactionCoordinator
from oncelog.txn.log_codec import decode_value, encode_key, encode_value
from oncelog.txn.messages import Reply, TxnStep, WriteMarkers
from oncelog.txn.metadata import TransactionMetadata, TxnState, TxnStateError
from tests.unit.test_txn_support import Action, acts, key, value

E = ErrorCode
S = TxnState
TXN = "txn-a"
P0 = ("out", 0)
P1 = ("out", 1)


class Shell:
    """A synchronous stand-in for the async shell: performs actions when told to."""

    def __init__(self, *, load: bool = True, **kw: Any) -> None:
        self.pids = itertools.count(1000)
        epoch = kw.pop("coordinator_epoch", 3)
        kw.setdefault("blocking_begin", False)
        self.coord = TransactionCoordinator(
            allocate_producer_id=lambda: next(self.pids),
            config=TxnConfig(**kw),
            coordinator_epoch=epoch,
        )
        self.now = 10_000
        self.log: list[tuple[bytes, bytes | None]] = []
        self.queue: deque[Action] = deque()
        self.trace: list[Action] = []
        self.replies: dict[int, Reply] = {}
        if load:
            self.absorb(self.coord.load([]))

    def absorb(self, step: TxnStep) -> Reply | Pending | None:
        self.replies.update(step.resolved)
        self.queue.extend(acts(step))
        self.trace.extend(acts(step))
        return step.reply

    def perform_one(self, error: ErrorCode = E.none) -> Action:
        action = self.queue.popleft()
        if isinstance(action, Append):
            if error is E.none:
                self.log.extend(action.records)
            self.absorb(self.coord.on_log_appended(action.owner, now_ms=self.now, error=error))
        else:
            self.absorb(self.coord.on_markers_written(action.transactional_id, now_ms=self.now))
        return action

    def drain(self) -> None:
        while self.queue:
            self.perform_one()

    def request(self, method: str, *args: Any, run: bool = True, **kw: Any) -> Reply | Pending:
        reply = self.absorb(getattr(self.coord, method)(*args, now_ms=self.now, **kw))
        assert reply is not None
        if run:
            self.drain()
            if isinstance(reply, Pending):
                return self.replies.pop(reply.token)
        return reply

    def probe(self, method: str, *args: Any, **kw: Any) -> Reply | Pending:
        """Call without performing anything (the reply must be immediate)."""
        step = getattr(self.coord, method)(*args, now_ms=self.now, **kw)
        assert isinstance(step.reply, Reply) and not acts(step)
        return step.reply

    def init(self, txn: str = TXN, timeout: int = 60_000, pid: int = -1, epoch: int = -1) -> Reply:
        r = self.request("init_producer_id", txn, timeout, pid, epoch)
        assert isinstance(r, Reply)
        return r

    def add(self, r: Reply, parts: Any = (P0,), txn: str = TXN) -> Reply | Pending:
        return self.request("add_partitions", txn, r.producer_id, r.producer_epoch, parts)

    def end(self, r: Reply, commit: bool = True, txn: str = TXN) -> Reply | Pending:
        return self.request("end_txn", txn, r.producer_id, r.producer_epoch, commit)

    def state(self, txn: str = TXN) -> TransactionMetadata:
        m = self.coord.describe(txn)
        assert m is not None
        return m


def ok(pid: int = -1, epoch: int = -1) -> Reply:
    return Reply(E.none, pid, epoch)


def err(code: ErrorCode) -> Reply:
    return Reply(code)


def kinds(actions: list[Action]) -> list[object]:
    return [a.label if isinstance(a, Append) else ("markers", a.commit) for a in actions]


# -- InitProducerId -------------------------------------------------------------------------


def test_requests_before_load_and_empty_id() -> None:
    sh = Shell(load=False)
    c = sh.coord
    assert c.init_producer_id(TXN, 1000, now_ms=0).reply == err(E.coordinator_load_in_progress)
    assert c.end_txn(TXN, 1, 0, True, now_ms=0).reply == err(E.coordinator_load_in_progress)
    assert acts(c.expire(0)) == []
    c.load([])
    assert c.init_producer_id("", 1000, now_ms=0).reply == err(E.invalid_request)
    assert c.add_partitions("", 1, 0, [P0], now_ms=0).reply == err(E.invalid_request)
    with pytest.raises(CoordinatorProtocolError):
        c.load([])


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_init_invalid_timeout(timeout: int) -> None:
    sh = Shell()
    assert sh.init(timeout=timeout) == err(E.invalid_transaction_timeout)
    assert sh.coord.describe(TXN) is None


def test_init_half_given_producer_is_invalid_request() -> None:
    sh = Shell()
    assert sh.init(pid=5, epoch=-1) == err(E.invalid_request)
    assert sh.init(pid=-1, epoch=3) == err(E.invalid_request)


def test_init_new_id_replies_after_append() -> None:
    sh = Shell()
    step = sh.coord.init_producer_id(TXN, 30_000, now_ms=sh.now)
    assert isinstance(step.reply, Pending) and not step.resolved
    [append] = acts(step)
    assert isinstance(append, Append) and append.label is S.EMPTY
    assert append.partition == partition_for(TXN, 50) and key(append) == encode_key(TXN)
    assert value(append) is not None
    logged = decode_value(TXN, value(append))
    assert (logged.producer_id, logged.producer_epoch, logged.txn_timeout_ms) == (1000, 0, 30_000)
    done = sh.coord.on_log_appended(TXN, now_ms=sh.now)
    assert dict(done.resolved) == {step.reply.token: ok(1000, 0)} and not acts(done)
    assert sh.state().state is S.EMPTY


def test_init_bumps_epoch_and_resets() -> None:
    sh = Shell()
    r = sh.init()
    assert sh.add(r, [P0, P1]) == ok()
    assert sh.end(r) == ok()
    assert sh.init(timeout=5_000) == ok(1000, 1)
    m = sh.state()
    assert (m.state, m.partitions, m.txn_timeout_ms, m.txn_start_ms) == (S.EMPTY, set(), 5_000, -1)
    assert m.last_producer_epoch == -1


def test_init_concurrent_when_pending_or_preparing() -> None:
    sh = Shell()
    r = sh.init()
    sh.add(r)
    pending = sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    assert isinstance(pending, Pending)
    assert sh.init() == err(E.concurrent_transactions)
    sh.drain()
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    sh.perform_one()  # PrepareCommit durable; markers outstanding
    assert sh.state().state is S.PREPARE_COMMIT
    assert sh.init() == err(E.concurrent_transactions)
    sh.drain()
    assert sh.init() == ok(1000, 1)


def test_init_fences_ongoing_transaction() -> None:
    sh = Shell()
    old = sh.init()
    assert sh.add(old, [P0, P1]) == ok()
    step = sh.coord.init_producer_id(TXN, 60_000, now_ms=sh.now)
    assert isinstance(step.reply, Pending)
    [fence] = acts(step)
    assert isinstance(fence, Append) and fence.label is S.PREPARE_ABORT
    assert value(fence) is not None and decode_value(TXN, value(fence)).producer_epoch == 1
    after = sh.coord.on_log_appended(TXN, now_ms=sh.now)
    assert dict(after.resolved) == {step.reply.token: err(E.concurrent_transactions)}
    assert acts(after) == [WriteMarkers(TXN, 1000, 1, False, frozenset({P0, P1}), 3)]
    # The old producer is fenced as soon as the abort is durable.
    assert sh.end(old) == err(E.producer_fenced)
    sh.absorb(after)
    sh.drain()
    assert sh.state().state is S.COMPLETE_ABORT
    assert sh.end(old) == err(E.producer_fenced)
    assert sh.add(old) == err(E.producer_fenced)
    assert sh.init() == ok(1000, 2)  # the client's retry bumps again


def test_epoch_exhaustion_rotates_producer_id() -> None:
    sh = Shell(load=False)
    m = TransactionMetadata(TXN, 7, 7, 32765, -1, 60_000, S.COMPLETE_COMMIT, set(), 5, 5)
    sh.coord.load([(TXN, encode_value(m))])
    assert sh.init() == ok(7, 32766)  # 32766 is still handed out
    r = sh.init()
    assert r == ok(1000, 0)
    m2 = sh.state()
    assert (m2.last_producer_id, m2.last_producer_epoch) == (7, -1)


def test_epoch_exhaustion_with_kip360_retry() -> None:
    sh = Shell(load=False)
    m = TransactionMetadata(TXN, 7, 7, 32766, 32765, 60_000, S.COMPLETE_ABORT, set(), 5, 5)
    sh.coord.load([(TXN, encode_value(m))])
    assert sh.init(pid=7, epoch=32766) == ok(1000, 0)
    m2 = sh.state()
    assert (m2.last_producer_id, m2.last_producer_epoch) == (7, 32766)
    # The reply was lost: the producer retries with its old id and epoch.
    assert sh.init(pid=7, epoch=32766) == ok(1000, 0)
    assert sh.init(pid=7, epoch=32765) == err(E.producer_fenced)


def test_fence_at_max_epoch_does_not_overflow() -> None:
    sh = Shell(load=False)
    m = TransactionMetadata(TXN, 7, 7, 32766, -1, 60_000, S.ONGOING, {P0}, 5, 5)
    sh.coord.load([(TXN, encode_value(m))])
    assert sh.init() == err(E.concurrent_transactions)
    assert sh.state().producer_epoch == 32767
    assert sh.init() == ok(1000, 0)


def test_kip360_init() -> None:
    sh = Shell()
    r = sh.init()
    assert sh.init(pid=1000, epoch=0) == ok(1000, 1)
    assert sh.state().last_producer_epoch == 0
    # Lost reply: a retry with the previous epoch gets the current one, no bump.
    assert sh.init(pid=1000, epoch=0) == ok(1000, 1)
    assert sh.init(pid=1000, epoch=1) == ok(1000, 2)
    assert sh.init(pid=1000, epoch=0) == err(E.producer_fenced)
    assert sh.init(pid=999, epoch=2) == err(E.producer_fenced)
    # A plain init fences every earlier epoch, including the KIP-360 retry window.
    assert sh.init() == ok(1000, 3)
    assert sh.init(pid=1000, epoch=2) == err(E.producer_fenced)
    # An id unknown to the coordinator accepts any expected producer (it expired).
    assert sh.init("other", pid=5, epoch=9) == ok(1001, 0)
    assert r.producer_id == 1000


# -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------


def test_add_partitions_validation() -> None:
    sh = Shell()
    assert sh.add(ok(1, 0)) == err(E.invalid_producer_id_mapping)
    r = sh.init()
    assert sh.add(ok(1, 0)) == err(E.invalid_producer_id_mapping)
    assert sh.add(ok(1000, 1)) == err(E.producer_fenced)
    assert sh.add(r) == ok()


def test_add_partitions_moves_to_ongoing_and_keeps_start() -> None:
    sh = Shell()
    r = sh.init()
    step = sh.coord.add_partitions(TXN, 1000, 0, [P0], now_ms=sh.now)
    assert isinstance(step.reply, Pending) and kinds(acts(step)) == [S.ONGOING]
    sh.absorb(step)
    sh.drain()
    start = sh.state().txn_start_ms
    assert start == sh.now and sh.state().state is S.ONGOING
    # Already present: answered at once, nothing logged.
    step = sh.coord.add_partitions(TXN, 1000, 0, [P0], now_ms=sh.now + 5)
    assert step.reply == ok() and acts(step) == []
    sh.now += 10
    assert sh.add(r, [P1]) == ok()
    m = sh.state()
    assert (m.partitions, m.txn_start_ms, m.txn_last_update_ms) == ({P0, P1}, start, sh.now)


def test_add_partitions_concurrent_while_pending_or_prepared() -> None:
    sh = Shell()
    r = sh.init()
    sh.request("add_partitions", TXN, 1000, 0, [P0], run=False)
    assert sh.add(r, [P1]) == err(E.concurrent_transactions)
    sh.drain()
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    sh.perform_one()
    assert sh.add(r, [P1]) == err(E.concurrent_transactions)
    sh.drain()
    assert sh.add(r, [P1]) == ok()


def test_add_offsets_uses_group_partition() -> None:
    sh = Shell(offsets_partitions=50)
    r = sh.init()
    assert sh.request("add_offsets", TXN, 1000, 0, "group-1") == ok()
    assert sh.state().partitions == {(CONSUMER_OFFSETS_TOPIC, 49)}
    assert sh.coord.offsets_partition("polygenelubricants") == 0
    assert sh.request("add_offsets", TXN, 1000, 1, "group-1") == err(E.producer_fenced)
    assert r.producer_epoch == 0


def test_verify_only() -> None:
    sh = Shell()
    r = sh.init()
    sh.add(r, [P0])
    step = sh.coord.add_partitions(TXN, 1000, 0, [P0, P1], now_ms=sh.now, verify_only=True)
    assert acts(step) == []
    assert step.reply == Reply(E.none, partition_errors={P0: E.none, P1: E.transaction_abortable})
    assert sh.state().partitions == {P0}
    step = sh.coord.add_partitions(TXN, 1000, 1, [P0], now_ms=sh.now, verify_only=True)
    assert step.reply == Reply(E.producer_fenced, partition_errors={P0: E.producer_fenced})
    step = sh.coord.add_partitions("nope", 1000, 0, [P0], now_ms=sh.now, verify_only=True)
    assert isinstance(step.reply, Reply) and step.reply.error is E.invalid_producer_id_mapping
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    sh.perform_one()
    step = sh.coord.add_partitions(TXN, 1000, 0, [P0], now_ms=sh.now, verify_only=True)
    assert isinstance(step.reply, Reply) and step.reply.error is E.concurrent_transactions
    sh.drain()
    step = sh.coord.add_partitions(TXN, 1000, 0, [P0], now_ms=sh.now, verify_only=True)
    assert step.reply == Reply(E.none, partition_errors={P0: E.transaction_abortable})


# -- EndTxn -----------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_full_flow_action_order(commit: bool) -> None:
    sh = Shell()
    r = sh.init()
    sh.trace.clear()
    assert sh.add(r, [P0, P1]) == ok()
    step = sh.coord.end_txn(TXN, 1000, 0, commit, now_ms=sh.now)
    assert isinstance(step.reply, Pending)
    sh.absorb(step)
    prepared = sh.coord.on_log_appended(TXN, now_ms=sh.now)
    sh.queue.popleft()
    # The client is answered once PrepareX is durable, before any marker is written.
    assert dict(prepared.resolved) == {step.reply.token: ok()}
    assert acts(prepared) == [WriteMarkers(TXN, 1000, 0, commit, frozenset({P0, P1}), 3)]
    sh.absorb(prepared)
    sh.drain()
    prep, done = (
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    )
    assert kinds(sh.trace) == [S.ONGOING, prep, ("markers", commit), done]
    m = sh.state()
    assert (m.state, m.partitions, m.producer_epoch) == (done, set(), 0)
    # Retrying the same EndTxn succeeds; the opposite one is a state error.
    assert sh.end(r, commit) == ok()
    assert sh.end(r, not commit) == err(E.invalid_txn_state)


def test_end_txn_without_partitions_skips_markers() -> None:
    sh = Shell()
    r = sh.init()
    assert sh.add(r, []) == ok()
    sh.trace.clear()
    assert sh.end(r) == ok()
    assert kinds(sh.trace) == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


def test_end_txn_errors() -> None:
    sh = Shell()
    assert sh.end(ok(1, 0)) == err(E.invalid_producer_id_mapping)
    r = sh.init()
    assert sh.end(r) == err(E.invalid_txn_state)  # Empty
    assert sh.end(ok(5, 0)) == err(E.invalid_producer_id_mapping)
    assert sh.end(ok(1000, 3)) == err(E.producer_fenced)
    sh.add(r)
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    # PrepareCommit append in flight
    assert sh.probe("end_txn", TXN, 1000, 0, True) == err(E.concurrent_transactions)
    sh.perform_one()
    assert sh.probe("end_txn", TXN, 1000, 0, True) == err(E.concurrent_transactions)
    # Complete is pending while markers are written, so Kafka answers this one the same way.
    assert sh.probe("end_txn", TXN, 1000, 0, False) == err(E.concurrent_transactions)
    sh.drain()
    assert sh.end(r, False) == err(E.invalid_txn_state)


# -- log append failures ----------------------------------------------------------------------


def test_failed_appends() -> None:
    sh = Shell()
    step = sh.coord.init_producer_id(TXN, 1000, now_ms=sh.now)
    assert isinstance(step.reply, Pending)
    sh.absorb(step)
    sh.perform_one(E.not_enough_replicas)
    assert sh.replies.pop(step.reply.token) == err(E.coordinator_not_available)
    r = sh.init()
    assert r == ok(1000, 0)  # the id was kept in memory; its first durable epoch is 0
    sh.add(r)
    end = sh.request("end_txn", TXN, 1000, 0, True, run=False)
    assert isinstance(end, Pending)
    sh.perform_one(E.kafka_storage_error)
    assert sh.replies.pop(end.token) == err(E.not_coordinator)
    assert sh.state().state is S.ONGOING and sh.state().pending_state is None
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    sh.perform_one()  # PrepareCommit
    sh.perform_one()  # markers
    assert isinstance(sh.queue[0], Append)
    sh.perform_one(E.not_enough_replicas)  # CompleteCommit failed: retried after a back-off
    [retry] = sh.queue
    assert isinstance(retry, Append) and retry.label is S.COMPLETE_COMMIT
    sh.drain()
    assert sh.state().state is S.COMPLETE_COMMIT


def test_failed_fence_keeps_producer_fenced_and_bumps_once() -> None:
    sh = Shell()
    r = sh.init()
    sh.add(r)
    init = sh.request("init_producer_id", TXN, 60_000, run=False)
    assert isinstance(init, Pending)
    sh.perform_one(E.not_enough_replicas)
    assert sh.replies.pop(init.token) == err(E.coordinator_not_available)
    m = sh.state()
    assert (m.state, m.producer_epoch, m.has_failed_epoch_fence) == (S.ONGOING, 1, True)
    assert sh.end(r) == err(E.producer_fenced)
    assert sh.init() == err(E.concurrent_transactions)
    assert (sh.state().state, sh.state().producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert sh.init() == ok(1000, 2)


# -- timeouts and expiration --------------------------------------------------------------------


def test_timeout_aborts_with_epoch_bump() -> None:
    sh = Shell()
    r = sh.init(timeout=1_000)
    sh.add(r, [P0])
    start = sh.state().txn_start_ms
    assert acts(sh.coord.expire(start + 1_000)) == []  # strictly after the deadline
    step = sh.coord.expire(start + 1_001)
    assert kinds(acts(step)) == [S.PREPARE_ABORT] and step.reply is None
    sh.absorb(step)
    sh.perform_one()
    assert sh.queue[0] == WriteMarkers(TXN, 1000, 1, False, frozenset({P0}), 3)
    assert acts(sh.coord.expire(start + 5_000)) == []  # already aborting
    sh.drain()
    assert sh.state().state is S.COMPLETE_ABORT
    # The late producer can neither commit nor continue; a re-init recovers.
    assert sh.end(r, True) == err(E.producer_fenced)
    assert sh.end(r, False) == err(E.producer_fenced)
    assert sh.add(r) == err(E.producer_fenced)
    assert sh.init(pid=1000, epoch=0) == err(E.producer_fenced)
    assert sh.init() == ok(1000, 2)


def test_timeout_skips_pending_transition() -> None:
    sh = Shell()
    r = sh.init(timeout=1_000)
    sh.add(r, [P0])
    sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    assert acts(sh.coord.expire(sh.now + 10_000)) == []


def test_transactional_id_expiration() -> None:
    sh = Shell(id_expiration_ms=1_000)
    r = sh.init()
    busy = sh.init("busy")
    sh.add(busy, txn="busy")
    t = sh.now
    assert acts(sh.coord.expire(t + 999)) == []
    step = sh.coord.expire(t + 1_000)
    [tomb] = acts(step)
    assert isinstance(tomb, Append) and value(tomb) is None and tomb.owner == TXN
    assert key(tomb) == encode_key(TXN) and tomb.label is None
    sh.absorb(step)
    # Tombstone in flight.
    assert sh.probe("init_producer_id", TXN, 1000) == err(E.concurrent_transactions)
    assert sh.probe("end_txn", TXN, 1000, 0, True) == err(E.concurrent_transactions)
    sh.drain()
    assert sh.coord.describe(TXN) is None
    assert sh.coord.describe("busy") is not None  # Ongoing ids never expire
    assert sh.end(r) == err(E.invalid_producer_id_mapping)
    assert sh.init() == ok(1002, 0)  # a fresh producer id


def test_expiration_append_failure_keeps_id() -> None:
    sh = Shell(id_expiration_ms=1_000)
    sh.init()
    sh.absorb(sh.coord.expire(sh.now + 5_000))
    sh.perform_one(E.not_enough_replicas)
    assert sh.state().pending_state is None
    assert sh.init() == ok(1000, 1)


# -- load / replay ------------------------------------------------------------------------------


def test_load_completes_prepared_commit() -> None:
    first = Shell()
    r = first.init()
    first.add(r, [P0, P1])
    first.request("end_txn", TXN, 1000, 0, True, run=False)
    first.perform_one()  # PrepareCommit durable, then the broker dies before the markers
    log = list(first.log)

    second = Shell(load=False, coordinator_epoch=4)
    step = second.coord.load(log)
    assert acts(step) == [WriteMarkers(TXN, 1000, 0, True, frozenset({P0, P1}), 4)]
    assert second.state().state is S.PREPARE_COMMIT
    second.absorb(step)
    second.drain()
    assert kinds(second.trace) == [("markers", True), S.COMPLETE_COMMIT]
    assert second.state().state is S.COMPLETE_COMMIT
    assert second.end(r, True) == ok()


def test_load_last_value_wins_and_tombstones() -> None:
    sh = Shell()
    r = sh.init()
    sh.add(r, [P0])
    sh.init("gone")
    log = [*sh.log, (encode_key("gone"), None)]
    other = Shell(load=False)
    assert acts(other.coord.load(log)) == []
    assert other.coord.describe("gone") is None
    m = other.state()
    assert (m.state, m.partitions, m.producer_epoch) == (S.ONGOING, {P0}, 0)
    assert other.add(r, [P1]) == ok()
    # An Ongoing transaction loaded from the log still times out.
    step = other.coord.expire(m.txn_start_ms + 60_001)
    assert kinds(acts(step)) == [S.PREPARE_ABORT]


def test_load_rejects_epoch_fence_state() -> None:
    m = TransactionMetadata(TXN, 1, 1, 0, -1, 1000, S.PREPARE_EPOCH_FENCE, set(), 1, 1)
    sh = Shell(load=False)
    with pytest.raises(TxnStateError):
        sh.coord.load([(TXN, encode_value(m))])


def test_load_prepared_without_partitions() -> None:
    m = TransactionMetadata(TXN, 1, 1, 0, -1, 1000, S.PREPARE_ABORT, set(), 1, 1)
    sh = Shell(load=False)
    step = sh.coord.load([(encode_key(TXN), encode_value(m))], now_ms=50)
    assert kinds(acts(step)) == [S.COMPLETE_ABORT]


# -- blocking begin -------------------------------------------------------------------------


def _committing(sh: Shell) -> Reply:
    r = sh.init()
    sh.add(r, [P0])
    assert isinstance(sh.request("end_txn", TXN, 1000, 0, True, run=False), Pending)
    sh.perform_one()  # PrepareCommit durable: the client has its reply, markers in flight
    return r


def test_blocking_begin_waits_for_markers() -> None:
    sh = Shell(blocking_begin=True)
    r = _committing(sh)
    step = sh.coord.add_partitions(TXN, 1000, 0, [P1], now_ms=sh.now)
    assert isinstance(step.reply, Pending) and acts(step) == []
    assert sh.coord.num_parked == 1
    token = step.reply.token
    sh.perform_one()  # markers written -> CompleteCommit append emitted
    assert token not in sh.replies
    completed = sh.coord.on_log_appended(TXN, now_ms=sh.now)
    sh.queue.popleft()
    # The parked request is re-run as a fresh one: it begins the next transaction.
    assert dict(completed.resolved) == {} and kinds(acts(completed)) == [S.ONGOING]
    sh.absorb(completed)
    sh.drain()
    assert sh.replies.pop(token) == ok()
    m = sh.state()
    assert (m.state, m.partitions) == (S.ONGOING, {P1})
    assert sh.end(r) == ok()


def test_blocking_begin_fifo_and_immediate_resolution() -> None:
    sh = Shell(blocking_begin=True)
    _committing(sh)
    sh.replies.clear()
    a = sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    b = sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    c = sh.request("add_offsets", TXN, 1000, 0, "group-1", run=False)
    d = sh.request("add_partitions", TXN, 1000, 7, [P1], run=False)  # fenced
    assert isinstance(d, Reply) and d.error is E.producer_fenced  # checked before parking
    assert all(isinstance(x, Pending) for x in (a, b, c))
    assert isinstance(a, Pending) and isinstance(b, Pending) and isinstance(c, Pending)
    sh.drain()
    assert sh.replies == {a.token: ok(), b.token: ok(), c.token: ok()}
    assert sh.state().partitions == {P1, (CONSUMER_OFFSETS_TOPIC, 49)}
    assert sh.coord.num_parked == 0


def test_blocking_begin_cancel() -> None:
    sh = Shell(blocking_begin=True)
    _committing(sh)
    sh.replies.clear()
    a = sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    assert isinstance(a, Pending)
    assert sh.coord.cancel(a.token) == err(E.concurrent_transactions)
    assert sh.coord.cancel(a.token) is None
    assert sh.coord.num_parked == 0
    sh.drain()
    assert sh.replies == {} and sh.state().state is S.COMPLETE_COMMIT
    # A request waiting on its own log append cannot be cancelled: its reply is coming.
    b = sh.request("add_partitions", TXN, 1000, 0, [P0], run=False)
    assert isinstance(b, Pending) and sh.coord.cancel(b.token) is None
    sh.drain()
    assert sh.replies.pop(b.token) == ok()


def test_blocked_begin_then_fenced_by_new_instance() -> None:
    sh = Shell(blocking_begin=True)
    _committing(sh)
    a = sh.request("add_partitions", TXN, 1000, 0, [P1], run=False)
    assert isinstance(a, Pending)
    sh.drain()
    assert sh.replies.pop(a.token) == ok()
    # The begun transaction is Ongoing; a new instance fences it.
    assert sh.init() == err(E.concurrent_transactions)
    assert sh.state().state is S.COMPLETE_ABORT
    assert sh.add(ok(1000, 0)) == err(E.producer_fenced)


def test_non_blocking_mode_bounces() -> None:
    sh = Shell(blocking_begin=False)
    _committing(sh)
    assert sh.request("add_partitions", TXN, 1000, 0, [P1], run=False) == err(
        E.concurrent_transactions
    )


# -- introspection, metrics and protocol misuse -----------------------------------------------


def test_describe_list_and_metrics() -> None:
    sh = Shell()
    a = sh.init("a")
    sh.init("b")
    c = sh.init("c")
    sh.add(a, [P0], txn="a")
    sh.now += 500
    sh.add(c, [P1], txn="c")
    assert sh.coord.num_transactional_ids == 3
    assert sh.coord.num_ongoing == 2
    assert [m.transactional_id for m in sh.coord.list()] == ["a", "b", "c"]
    assert [m.transactional_id for m in sh.coord.list(states=["Ongoing"])] == ["a", "c"]
    assert [m.transactional_id for m in sh.coord.list(states=[S.EMPTY])] == ["b"]
    assert [m.transactional_id for m in sh.coord.list(producer_ids=[1001])] == ["b"]
    long = sh.coord.list(min_duration_ms=400, now_ms=sh.now + 100)
    assert [m.transactional_id for m in long] == ["a"]
    with pytest.raises(ValueError):
        sh.coord.list(min_duration_ms=1)
    # describe() returns a copy.
    d = sh.state("a")
    d.partitions.add(("x", 9))
    assert sh.state("a").partitions == {P0}
    assert S.PREPARE_COMMIT.kafka_name == "PrepareCommit"


def test_protocol_misuse_raises() -> None:
    sh = Shell()
    with pytest.raises(CoordinatorProtocolError):
        sh.coord.on_log_appended(TXN, now_ms=0)
    r = sh.init()
    sh.add(r)
    sh.request("end_txn", TXN, 1000, 0, True, run=False)
    with pytest.raises(CoordinatorProtocolError):
        sh.coord.on_markers_written(TXN, now_ms=0)  # the Prepare append is still outstanding
    sh.perform_one()
    with pytest.raises(CoordinatorProtocolError):
        sh.coord.on_log_appended(TXN, now_ms=0)  # markers are outstanding, not an append


def test_state_table_matches_kafka() -> None:
    assert [(s.name, int(s)) for s in S] == [
        ("EMPTY", 0),
        ("ONGOING", 1),
        ("PREPARE_COMMIT", 2),
        ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4),
        ("COMPLETE_ABORT", 5),
        ("DEAD", 6),
        ("PREPARE_EPOCH_FENCE", 7),
    ]
    # Kafka 4.x: an idle state may precede PrepareAbort (a TV2 abort with nothing added) ...
    assert S.PREPARE_ABORT.valid_previous_states == {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }
    # ... but never for a TV1 client: prepare refuses it, before any record is written.
    idle = TransactionMetadata(TXN, 1, producer_epoch=0)
    with pytest.raises(TxnStateError, match="transaction version 1"):
        idle.prepare(S.PREPARE_ABORT, txn_start_ms=5)
    assert idle.pending_state is None
    assert S.DEAD.valid_previous_states == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_kafka_name("CompleteAbort") is S.COMPLETE_ABORT
    m = TransactionMetadata(TXN, 1, producer_epoch=0)
    with pytest.raises(TxnStateError):
        m.prepare(S.PREPARE_COMMIT)  # Empty -> PrepareCommit is illegal
    target = m.prepare(S.ONGOING, partitions={P0}, txn_start_ms=1, txn_last_update_ms=1)
    with pytest.raises(TxnStateError):
        m.prepare(S.ONGOING)  # already pending
    m.complete(target)
    assert (m.state, m.partitions, m.pending_state) == (S.ONGOING, {P0}, None)
