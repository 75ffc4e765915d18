"""Random request/IO interleavings against the transaction coordinator, with restarts.

The machine plays both the clients and the async shell: it performs the coordinator's actions
in random order (sometimes failing log appends), keeps the durable ``__transaction_state``
log, and checks KIP-98's guarantees against that log rather than the coordinator's memory.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from kio.schema.errors import ErrorCode

from oncelog.coordinator.runtime import Append, Pending
from oncelog.txn.config import TxnConfig
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.log_codec import decode_value
from oncelog.txn.messages import Reply, WriteMarkers
from oncelog.txn.messages import TxnStep as Step
from oncelog.txn.metadata import TransactionMetadata, TxnState
from tests.unit.test_txn_support import Action, acts, key, owner, value

E = ErrorCode
S = TxnState
IDS = ["t1", "t2"]
PARTS = [("out", 0), ("out", 1), ("x", 0)]
idx = st.integers(0, 1000)


@dataclass(frozen=True)
class Req:
    kind: str
    txn: str
    pid: int = -1
    epoch: int = -1
    commit: bool = False
    parts: frozenset[tuple[str, int]] = frozenset()


class CoordinatorMachine(RuleBasedStateMachine):
    blocking = False

    def __init__(self) -> None:
        super().__init__()
        self.pids = itertools.count(100)
        self.now = 1_000
        self.coord_epoch = 0
        self.log: list[tuple[bytes, bytes | None]] = []
        self.persisted: dict[str, TransactionMetadata | None] = {}
        self.max_epoch: dict[int, int] = {}
        self.pid_owner: dict[int, str] = {}
        self.granted: dict[str, list[tuple[int, int]]] = {t: [] for t in IDS}
        self.commit_requests: set[tuple[str, int, int]] = set()
        self.outstanding: dict[str, Action] = {}
        self.requests: dict[int, Req] = {}
        self.prepare_seq: dict[str, int] = dict.fromkeys(IDS, 0)
        self.markers_for: dict[str, int] = {}
        self.coord = self._new_coordinator()
        self._process(self.coord.load([]))

    def _new_coordinator(self) -> TransactionCoordinator:
        self.coord_epoch += 1
        return TransactionCoordinator(
            allocate_producer_id=lambda: next(self.pids),
            config=TxnConfig(
                max_timeout_ms=5_000,
                id_expiration_ms=8_000,
                blocking_begin=self.blocking,
                offsets_partitions=3,
            ),
            coordinator_epoch=self.coord_epoch,
        )

    # -- the checks -----------------------------------------------------------------------

    def _is_current(self, txn: str, pid: int, epoch: int) -> bool:
        last = self.persisted.get(txn)
        return last is not None and last.producer_id == pid and self.max_epoch.get(pid) == epoch

    def _check_reply(self, req: Req, reply: Reply) -> None:
        event(f"{req.kind} -> {reply.error.name}")
        if req.kind == "init":
            if reply.ok:
                last = self.persisted[req.txn]
                assert last is not None and last.state is S.EMPTY
                assert (last.producer_id, last.producer_epoch) == (
                    reply.producer_id,
                    reply.producer_epoch,
                )
                self.granted[req.txn].append((reply.producer_id, reply.producer_epoch))
        elif req.kind == "verify":
            assert reply.partition_errors is not None
            for p, e in reply.partition_errors.items():
                if e is E.none:
                    last = self.persisted[req.txn]
                    assert self._is_current(req.txn, req.pid, req.epoch)
                    assert last is not None and last.state is S.ONGOING and p in last.partitions
        elif reply.ok:
            # A fenced (older-epoch or older-id) producer never gets a success.
            assert self._is_current(req.txn, req.pid, req.epoch), (req, self.persisted[req.txn])
            last = self.persisted[req.txn]
            assert last is not None
            if req.kind == "add":
                assert last.state is S.ONGOING and req.parts <= last.partitions
            if req.kind == "end":
                done = S.COMPLETE_COMMIT if req.commit else S.COMPLETE_ABORT
                prep = S.PREPARE_COMMIT if req.commit else S.PREPARE_ABORT
                assert last.state in (done, prep)

    def _process(self, step: Step, req: Req | None = None) -> None:
        if isinstance(step.reply, Pending):
            assert req is not None
            self.requests[step.reply.token] = req
        elif isinstance(step.reply, Reply):
            assert req is not None
            self._check_reply(req, step.reply)
        for token, reply in step.resolved:
            self._check_reply(self.requests.pop(token), reply)
        for action in acts(step):
            txn = owner(action)
            assert txn not in self.outstanding, "two actions outstanding for one id"
            if isinstance(action, WriteMarkers):
                event(f"markers commit={action.commit}")
                last = self.persisted[txn]
                assert last is not None and last.state.is_prepare
                assert action.commit == (last.state is S.PREPARE_COMMIT)
                assert (action.producer_id, action.producer_epoch) == (
                    last.producer_id,
                    last.producer_epoch,
                )
                assert action.partitions == last.partitions and action.partitions
                assert action.coordinator_epoch == self.coord_epoch
                assert self.markers_for.get(txn) != self.prepare_seq[txn], "markers twice"
                self.markers_for[txn] = self.prepare_seq[txn]
                if action.commit:  # the coordinator never commits on its own
                    assert (txn, action.producer_id, action.producer_epoch) in self.commit_requests
            self.outstanding[txn] = action

    def _persist(self, action: Append) -> TransactionMetadata | None:
        txn = owner(action)
        prev = self.persisted.get(txn)
        self.log.append((key(action), value(action)))
        if value(action) is None:
            assert prev is not None and prev.state.expiration_allowed
            self.persisted[txn] = None
            return None
        m = decode_value(txn, value(action))
        assert m.state is action.label
        if prev is None:
            assert m.state is S.EMPTY
        else:
            assert prev.state in m.state.valid_previous_states, (prev.state, m.state)
        # Epochs never go backwards for a producer id, and an id belongs to one txn id.
        assert self.pid_owner.setdefault(m.producer_id, txn) == txn
        assert m.producer_epoch >= self.max_epoch.get(m.producer_id, -1)
        self.max_epoch[m.producer_id] = m.producer_epoch
        self.persisted[txn] = m
        return m

    def _expect_completion_start(self, step: Step, m: TransactionMetadata) -> None:
        mine = [a for a in acts(step) if owner(a) == m.transactional_id]
        assert len(mine) == 1, mine
        if m.partitions:
            assert isinstance(mine[0], WriteMarkers)
        else:
            assert isinstance(mine[0], Append) and mine[0].label is not None
            assert mine[0].label.is_complete

    # -- client rules ----------------------------------------------------------------------

    def _producer(self, txn: str, i: int) -> tuple[int, int]:
        """Mostly the newest producer of ``txn``; sometimes a stale or unknown one."""
        options = self.granted[txn] + [(999, 0)]
        return options[-2] if i % 4 and len(options) > 1 else options[i % len(options)]

    @rule(
        txn=st.sampled_from(IDS),
        i=idx,
        kip360=st.booleans(),
        timeout=st.sampled_from([1_500, 5_000, 5_000, 6_000]),
    )
    def init(self, txn: str, i: int, kip360: bool, timeout: int) -> None:
        pid, epoch = self._producer(txn, i) if kip360 else (-1, -1)
        step = self.coord.init_producer_id(txn, timeout, pid, epoch, now_ms=self.now)
        self._process(step, Req("init", txn, pid, epoch))

    @rule(txn=st.sampled_from(IDS), i=idx, parts=st.frozensets(st.sampled_from(PARTS), max_size=2))
    def add(self, txn: str, i: int, parts: frozenset[tuple[str, int]]) -> None:
        pid, epoch = self._producer(txn, i)
        step = self.coord.add_partitions(txn, pid, epoch, parts, now_ms=self.now)
        if isinstance(step.reply, Pending) and not acts(step):
            event("add parked")
        self._process(step, Req("add", txn, pid, epoch, parts=parts))

    @rule(txn=st.sampled_from(IDS), i=idx, group=st.sampled_from(["g1", "g2"]))
    def add_offsets(self, txn: str, i: int, group: str) -> None:
        pid, epoch = self._producer(txn, i)
        part = frozenset({("__consumer_offsets", self.coord.offsets_partition(group))})
        step = self.coord.add_offsets(txn, pid, epoch, group, now_ms=self.now)
        self._process(step, Req("add", txn, pid, epoch, parts=part))

    @rule(txn=st.sampled_from(IDS), i=idx, parts=st.frozensets(st.sampled_from(PARTS), max_size=2))
    def verify(self, txn: str, i: int, parts: frozenset[tuple[str, int]]) -> None:
        pid, epoch = self._producer(txn, i)
        step = self.coord.add_partitions(txn, pid, epoch, parts, now_ms=self.now, verify_only=True)
        assert isinstance(step.reply, Reply) and not acts(step)
        self._process(step, Req("verify", txn, pid, epoch, parts=parts))

    @rule(txn=st.sampled_from(IDS), i=idx, commit=st.booleans())
    def end(self, txn: str, i: int, commit: bool) -> None:
        pid, epoch = self._producer(txn, i)
        if commit:
            self.commit_requests.add((txn, pid, epoch))
        step = self.coord.end_txn(txn, pid, epoch, commit, now_ms=self.now)
        self._process(step, Req("end", txn, pid, epoch, commit))

    @rule(
        txn=st.sampled_from(IDS),
        commit=st.booleans(),
        parts=st.frozensets(st.sampled_from(PARTS), max_size=2),
    )
    def end_then_begin(self, txn: str, commit: bool, parts: frozenset[tuple[str, int]]) -> None:
        """The client's fast path: EndTxn answered, then at once the next transaction's first
        AddPartitionsToTxn, which meets the markers still in flight."""
        self.end(txn, 1, commit)
        action = self.outstanding.get(txn)
        if isinstance(action, Append) and action.label is not None and action.label.is_prepare:
            self.outstanding.pop(txn)
            self._deliver_append(txn, action, fail=1)
        self.add(txn, 1, parts)

    @precondition(lambda self: self.requests)
    @rule(i=idx)
    def cancel(self, i: int) -> None:
        token = sorted(self.requests)[i % len(self.requests)]
        reply = self.coord.cancel(token)
        if reply is not None:
            event("cancelled a parked request")
            assert reply.error is E.concurrent_transactions
            assert self.requests.pop(token).kind == "add"

    # -- shell rules -----------------------------------------------------------------------

    @rule(ms=st.integers(0, 2_000))
    def tick(self, ms: int) -> None:
        self.now += ms
        step = self.coord.expire(self.now)
        assert step.reply is None and not step.resolved
        self._process(step)

    @precondition(lambda self: self.outstanding)
    @rule(i=idx, fail=st.integers(0, 4))
    def deliver(self, i: int, fail: int) -> None:
        txn = sorted(self.outstanding)[i % len(self.outstanding)]
        action = self.outstanding.pop(txn)
        if isinstance(action, WriteMarkers):
            step = self.coord.on_markers_written(txn, now_ms=self.now)
            assert len(acts(step)) == 1 and isinstance(acts(step)[0], Append)
            assert acts(step)[0].label is (S.COMPLETE_COMMIT if action.commit else S.COMPLETE_ABORT)
            self._process(step)
            return
        self._deliver_append(txn, action, fail)

    def _deliver_append(self, txn: str, action: Append, fail: int) -> None:
        if fail == 0:
            self._process(
                self.coord.on_log_appended(txn, now_ms=self.now, error=E.not_enough_replicas)
            )
            return
        m = self._persist(action)
        if m is not None and m.state.is_prepare:
            self.prepare_seq[txn] += 1
        step = self.coord.on_log_appended(txn, now_ms=self.now)
        if m is not None and m.state.is_prepare:
            self._expect_completion_start(step, m)
        self._process(step)

    @precondition(lambda self: self.outstanding)
    @rule()
    def deliver_all(self) -> None:
        while self.outstanding:
            self.deliver(0, 1)

    @rule(go=st.integers(0, 3))
    def restart(self, go: int) -> None:
        """Crash: in-flight actions and client requests are lost; the log survives."""
        if go:
            return
        self.outstanding.clear()
        self.requests.clear()
        self.markers_for.clear()
        self.coord = self._new_coordinator()
        prepared = [m for m in self.persisted.values() if m is not None and m.state.is_prepare]
        event(f"restart with {len(prepared)} prepared")
        for m in prepared:
            self.prepare_seq[m.transactional_id] += 1
        step = self.coord.load(self.log)
        for m in prepared:
            self._expect_completion_start(step, m)
        assert len(acts(step)) == len(prepared)
        self._process(step)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def memory_never_behind_the_log(self) -> None:
        ongoing = 0
        for txn in IDS:
            m = self.coord.describe(txn)
            last = self.persisted.get(txn)
            if m is None:
                assert last is None or txn in self.outstanding
                continue
            ongoing += m.state is S.ONGOING or m.state.is_prepare
            if last is not None and m.producer_id == last.producer_id:
                assert m.producer_epoch >= last.producer_epoch
            if m.state is S.ONGOING:
                assert not isinstance(self.outstanding.get(txn), WriteMarkers)
        assert self.coord.num_ongoing == ongoing

    def teardown(self) -> None:
        # Liveness: once every action is performed, every request has its answer and no
        # transaction is left half-finished.
        self.deliver_all()
        assert not self.requests, self.requests
        assert self.coord.num_parked == 0
        for txn in IDS:
            m = self.coord.describe(txn)
            assert m is None or (m.pending_state is None and not m.state.is_prepare)


class BlockingCoordinatorMachine(CoordinatorMachine):
    blocking = True


_settings = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
TestCoordinatorMachine.settings = _settings
TestBlockingCoordinatorMachine = BlockingCoordinatorMachine.TestCase
TestBlockingCoordinatorMachine.settings = _settings
