"""The driver's commit protocol and the decision store, against in-memory fakes of the
transaction coordinator and the group coordinator (no broker, no Spark)."""

from __future__ import annotations

import datetime
import json
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.spark import commit as protocol
from oncelog.spark.commit import ExactlyOnceViolation, OncelogCommitMessage, TransactionsTimedOut
from oncelog.spark.decisions import (
    DECISIONS_TOPIC,
    MAX_METADATA_BYTES,
    DecisionError,
    DecisionStore,
    decode_chunks,
    encode_chunks,
)
from oncelog.spark.options import parse_write_options

PREFIX, QUERY = "oncelog-spark", "q1"
OPTS = parse_write_options({"kafka.bootstrap.servers": "fake:1", "topic": "out"})


# -- decision chunking ----------------------------------------------------------------------


def test_chunks_roundtrip_and_stay_small() -> None:
    entries = [(p, a, 10_000 + p, 3 + a) for p in range(700) for a in range(2)]
    chunks = encode_chunks(41, entries)
    assert len(chunks) > 1
    assert all(len(c.encode()) < MAX_METADATA_BYTES for c in chunks)
    assert json.loads(chunks[0])["n"] == len(chunks)
    assert decode_chunks(41, chunks).entries == tuple(sorted(entries))


def test_small_and_empty_decisions_have_one_chunk() -> None:
    assert len(encode_chunks(0, [])) == 1
    assert decode_chunks(0, encode_chunks(0, [])).entries == ()
    assert decode_chunks(5, encode_chunks(5, [(1, 0, 7, 0)])).entries == ((1, 0, 7, 0),)


def test_chunks_detect_mixed_batches_and_missing_chunks() -> None:
    entries = [(p, 0, p, 0) for p in range(600)]
    a, b = encode_chunks(1, entries), encode_chunks(2, entries)
    with pytest.raises(DecisionError):
        decode_chunks(2, [b[0], a[1], *b[2:]])
    with pytest.raises(DecisionError):
        decode_chunks(1, a[:-1])
    with pytest.raises(DecisionError):
        decode_chunks(1, ["not json"])


# -- fakes ----------------------------------------------------------------------------------


class FakeGroupConsumer:
    """OffsetCommit / OffsetFetch of one group, as confluent-kafka's Consumer exposes them."""

    def __init__(self, groups: dict[int, tuple[int, str]]) -> None:
        self.offsets = groups  # partition -> (offset, metadata)
        self.commits: list[list[int]] = []

    def commit(self, offsets: list[Any], asynchronous: bool = True) -> list[Any]:
        assert not asynchronous
        self.commits.append([tp.partition for tp in offsets])
        for tp in offsets:
            assert tp.topic == DECISIONS_TOPIC
            self.offsets[tp.partition] = (tp.offset, tp.metadata)
        return offsets

    def committed(self, tps: list[Any], timeout: float = -1) -> list[Any]:
        out = []
        for tp in tps:
            off, meta = self.offsets.get(tp.partition, (-1001, ""))
            out.append(
                SimpleNamespace(
                    topic=tp.topic, partition=tp.partition, offset=off, metadata=meta, error=None
                )
            )
        return out

    def close(self) -> None:
        pass


class FakeCoordinator:
    """Transaction states as DescribeTransactions shows them; EndTxn as Kafka answers it."""

    def __init__(self) -> None:
        self.txns: dict[str, SimpleNamespace] = {}
        self.calls: list[tuple[str, str]] = []

    def open(self, tid: str, pid: int, epoch: int, age_s: float = 1.0) -> tuple[int, int]:
        self.txns[tid] = SimpleNamespace(
            transactional_id=tid,
            transaction_state="Ongoing",
            producer_id=pid,
            producer_epoch=epoch,
            transaction_start_time=datetime.datetime.now(datetime.UTC)
            - datetime.timedelta(seconds=age_s),
            transaction_timeout=datetime.timedelta(milliseconds=OPTS.transaction_timeout_ms),
        )
        return pid, epoch

    def time_out(self, tid: str) -> None:
        t = self.txns[tid]
        t.transaction_state, t.producer_epoch = "CompleteAbort", t.producer_epoch + 1

    # TxnAdmin API used by oncelog.spark.commit
    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool) -> ErrorCode:
        self.calls.append(("commit" if commit else "abort", tid))
        t = self.txns.get(tid)
        if t is None or (t.producer_id, t.producer_epoch) != (pid, epoch):
            return ErrorCode.producer_fenced
        done = "CompleteCommit" if commit else "CompleteAbort"
        if t.transaction_state == "Ongoing":
            t.transaction_state = done
            return ErrorCode.none
        return ErrorCode.none if t.transaction_state == done else ErrorCode.invalid_txn_state

    def describe_txn(self, tid: str) -> Any:
        return self.txns.get(tid)

    def describe_many(self, tids: Any) -> dict[str, Any]:
        return {t: self.txns.get(t) for t in tids}

    def list_transactions(self, states: tuple[str, ...] = ("Ongoing",)) -> list[Any]:
        return [
            SimpleNamespace(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                state=t.transaction_state,
            )
            for t in self.txns.values()
            if t.transaction_state in states
        ]

    def fence(self, tid: str) -> tuple[int, int]:
        self.calls.append(("fence", tid))
        t = self.txns[tid]
        if t.transaction_state == "Ongoing":
            t.transaction_state = "CompleteAbort"
        t.producer_epoch += 1
        return t.producer_id, t.producer_epoch

    def close(self) -> None:
        pass

    def __enter__(self) -> FakeCoordinator:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    coordinator = FakeCoordinator()
    group: dict[int, tuple[int, str]] = {}

    def store(*args: Any, **kwargs: Any) -> DecisionStore:
        s = DecisionStore(*args, **kwargs)
        s._group._consumer = FakeGroupConsumer(group)
        return s

    monkeypatch.setattr(protocol, "TxnAdmin", lambda *a, **k: coordinator)
    monkeypatch.setattr(protocol, "DecisionStore", store)
    monkeypatch.setattr("oncelog.spark.decisions.ensure_decisions_topic", lambda *a, **k: None)
    return SimpleNamespace(
        coord=coordinator, group=group, store=lambda: store(ClientConfig("fake:1"), PREFIX, QUERY)
    )


def tid(p: int, a: int = 0) -> str:
    return f"{PREFIX}-{QUERY}-{p}-{a}"


def prepared(
    world: SimpleNamespace, batch: int, parts: range, attempt: int = 0
) -> list[OncelogCommitMessage | None]:
    msgs: list[OncelogCommitMessage | None] = []
    for p in parts:
        pid, epoch = world.coord.open(tid(p, attempt), 100 + p, 5)
        msgs.append(OncelogCommitMessage(p, attempt, 10, tid(p, attempt), pid, epoch, QUERY, batch))
    return msgs


# -- the protocol ---------------------------------------------------------------------------


def test_commit_decides_then_commits_then_cleans_up(world: SimpleNamespace) -> None:
    msgs = prepared(world, 7, range(3))
    world.coord.open(tid(1, 1), 500, 0)  # a dead retry of task 1
    world.coord.open("someone-else-1", 600, 0)  # not ours
    protocol.commit_batch(OPTS, [*msgs, None], 7)
    assert world.store().read(7).entries == tuple((p, 0, 100 + p, 5) for p in range(3))
    assert {world.coord.txns[tid(p)].transaction_state for p in range(3)} == {"CompleteCommit"}
    assert world.coord.txns[tid(1, 1)].transaction_state == "CompleteAbort"
    assert world.coord.txns["someone-else-1"].transaction_state == "Ongoing"
    # The decision is written before the first EndTxn.
    assert world.coord.calls[0] == ("commit", tid(0))


def test_commit_is_idempotent(world: SimpleNamespace) -> None:
    msgs = prepared(world, 3, range(2))
    protocol.commit_batch(OPTS, msgs, 3)
    protocol.commit_batch(OPTS, msgs, 3)  # Spark may call commit again, e.g. after a restart
    skipped: list[OncelogCommitMessage | None] = [
        OncelogCommitMessage(p, 0, 0, None, query_id=QUERY, batch_id=3, skipped=True)
        for p in range(2)
    ]
    protocol.commit_batch(OPTS, skipped, 3)  # the replay after a crash before Spark's commit log
    assert {world.coord.txns[tid(p)].transaction_state for p in range(2)} == {"CompleteCommit"}


def test_roll_forward_after_a_crash_between_decision_and_endtxn(world: SimpleNamespace) -> None:
    msgs = prepared(world, 4, range(3))
    world.store().write(
        4, [(m.partition_id, m.attempt, m.producer_id, m.producer_epoch) for m in msgs if m]
    )
    world.coord.end_txn(tid(0), 100, 5, True)  # the dead driver got one commit out
    skipped: list[OncelogCommitMessage | None] = [
        OncelogCommitMessage(p, 0, 0, None, query_id=QUERY, batch_id=4, skipped=True)
        for p in range(3)
    ]
    protocol.commit_batch(OPTS, skipped, 4)
    assert {world.coord.txns[tid(p)].transaction_state for p in range(3)} == {"CompleteCommit"}


def test_timed_out_batch_with_nothing_committed_is_retracted(world: SimpleNamespace) -> None:
    msgs = prepared(world, 9, range(3))
    world.store().write(
        9, [(m.partition_id, m.attempt, m.producer_id, m.producer_epoch) for m in msgs if m]
    )
    world.coord.time_out(tid(0))
    world.coord.time_out(tid(2))
    with pytest.raises(TransactionsTimedOut, match="batch 9.*retracted.*Restart"):
        protocol.commit_batch(
            OPTS, [OncelogCommitMessage(0, 0, 0, None, query_id=QUERY, batch_id=9, skipped=True)], 9
        )
    assert world.coord.txns[tid(1)].transaction_state == "CompleteAbort"  # the live one aborted too
    assert world.store().decided_through() == 8 and world.store().read(9) is None
    assert not any(c == ("commit", tid(1)) for c in world.coord.calls)


def test_torn_batch_fails_loudly(world: SimpleNamespace) -> None:
    msgs = prepared(world, 2, range(3))
    world.store().write(
        2, [(m.partition_id, m.attempt, m.producer_id, m.producer_epoch) for m in msgs if m]
    )
    world.coord.end_txn(tid(0), 100, 5, True)  # committed before the outage
    world.coord.time_out(tid(1))  # timed out during the outage
    skipped: list[OncelogCommitMessage | None] = [
        OncelogCommitMessage(0, 0, 0, None, query_id=QUERY, batch_id=2, skipped=True)
    ]
    with pytest.raises(ExactlyOnceViolation) as info:
        protocol.commit_batch(OPTS, skipped, 2)
    text = str(info.value)
    assert (
        "batch 2" in text
        and tid(1) in text
        and "transactionTimeoutMs" in text
        and "MISSING" in text
    )
    assert world.coord.txns[tid(2)].transaction_state == "CompleteCommit"  # salvage what can be
    assert world.store().read(2) is not None  # the decision stays: every restart fails again


def test_fresh_commit_refuses_transactions_about_to_time_out(world: SimpleNamespace) -> None:
    msgs = prepared(world, 6, range(2))
    world.coord.txns[tid(1)].transaction_start_time -= datetime.timedelta(
        milliseconds=OPTS.transaction_timeout_ms - 1000
    )
    with pytest.raises(TransactionsTimedOut, match="batch 6 was not committed"):
        protocol.commit_batch(OPTS, msgs, 6)
    assert world.store().read(6) is None
    assert {world.coord.txns[tid(p)].transaction_state for p in range(2)} == {"CompleteAbort"}


def test_abort_keeps_a_decided_batch_for_the_replay(world: SimpleNamespace) -> None:
    msgs = prepared(world, 5, range(2))
    world.store().write(
        5, [(m.partition_id, m.attempt, m.producer_id, m.producer_epoch) for m in msgs if m]
    )
    world.coord.open(tid(0, 1), 900, 0)
    protocol.abort_batch(OPTS, msgs, 5)
    assert {world.coord.txns[tid(p)].transaction_state for p in range(2)} == {"Ongoing"}
    assert world.coord.txns[tid(0, 1)].transaction_state == "CompleteAbort"


def test_abort_of_an_undecided_batch_aborts_everything(world: SimpleNamespace) -> None:
    msgs = prepared(world, 5, range(2))
    world.coord.open(tid(1, 1), 900, 0)
    protocol.abort_batch(OPTS, [msgs[0], None], 5)
    assert {t.transaction_state for t in world.coord.txns.values()} == {"CompleteAbort"}


def test_skipped_tasks_without_a_decision_are_an_error(world: SimpleNamespace) -> None:
    with pytest.raises(DecisionError):
        protocol.commit_batch(
            OPTS, [OncelogCommitMessage(0, 0, 0, None, query_id=QUERY, batch_id=1, skipped=True)], 1
        )


def test_superseded_batch_is_a_no_op(world: SimpleNamespace) -> None:
    world.store().write(8, [])
    msgs = prepared(world, 7, range(1))
    protocol.commit_batch(OPTS, msgs, 7)
    assert world.coord.txns[tid(0)].transaction_state == "Ongoing"
    assert world.coord.calls == []


def test_multi_chunk_decision_commits_chunk_zero_last(world: SimpleNamespace) -> None:
    store = world.store()
    entries = [(p, 0, 1000 + p, 1) for p in range(800)]
    store.write(12, entries)
    commits = store._group._consumer.commits
    assert commits[-1] == [0] and 0 not in commits[0]
    assert store.read(12).entries == tuple(entries)
    assert store.decided_through() == 12


def test_torn_batch_recovery_procedure(world: SimpleNamespace) -> None:
    """docs/spark.md: after an ExactlyOnceViolation, an operator accepts the loss by
    replacing the decision with an empty one; the replay then commits nothing."""
    msgs = prepared(world, 2, range(2))
    world.store().write(
        2, [(m.partition_id, m.attempt, m.producer_id, m.producer_epoch) for m in msgs if m]
    )
    world.coord.end_txn(tid(0), 100, 5, True)
    world.coord.time_out(tid(1))
    skipped: list[OncelogCommitMessage | None] = [
        OncelogCommitMessage(0, 0, 0, None, query_id=QUERY, batch_id=2, skipped=True)
    ]
    with pytest.raises(ExactlyOnceViolation):
        protocol.commit_batch(OPTS, skipped, 2)
    world.store().write(2, [])
    protocol.commit_batch(OPTS, skipped, 2)
    assert world.store().decided_through() == 2
