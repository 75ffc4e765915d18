"""The Spark sink's driver commit path with two-phase-commit task transactions (KIP-939),
against a real broker with ``transaction.two.phase.commit.enable``: the driver completes
each prepared task transaction as its own producer (InitProducerId keepPreparedTxn, then
EndTxn v5) instead of an EndTxn on the task producer's behalf, and still commits exactly
once when run again, after a crash between the two requests, or to abort.

The sink's tasks write with librdkafka, which cannot open a 2PC transaction, so the tasks
are played here by raw InitProducerId v6 (enable2Pc) + Produce v12 requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.protocol import ProtocolClient
from oncelog.client.transactions import TxnAdmin
from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.spark.commit import (
    OncelogCommitMessage,
    abort_batch,
    commit_batch,
    is_committed,
    transactional_id,
)
from oncelog.spark.options import WriteOptions, parse_write_options

from .helpers import create_topic
from .test_transactions import READ_COMMITTED, end_offsets, read_all
from .test_txn_2pc_wire import TWO_PC, init_v6
from .test_txn_v2_wire import produce_v12

QUERY = "q-2pc"


@pytest.fixture
def tpc_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=TWO_PC).start()
    try:
        yield b
    finally:
        b.stop()


def options(b: EmbeddedBroker, topic: str) -> WriteOptions:
    return parse_write_options({"kafka.bootstrap.servers": b.bootstrap, "topic": topic})


def task(
    b: EmbeddedBroker, opts: WriteOptions, topic: str, partition: int, batch: int, attempt: int = 0
) -> OncelogCommitMessage:
    """A write task that prepares a 2PC transaction with one record and "dies"."""
    tid = transactional_id(opts.transactional_id_prefix, QUERY, partition, attempt)
    with WireClient(b.bootstrap) as c:
        code, pid, epoch, _, _ = init_v6(c, txn=tid)
        assert code == ErrorCode.none
        assert produce_v12(c, topic, (partition,), pid, epoch, 0, tid) == [ErrorCode.none]
    return OncelogCommitMessage(partition, attempt, 1, tid, pid, epoch, QUERY, batch)


def states(b: EmbeddedBroker, msgs: list[OncelogCommitMessage]) -> list[tuple[str, int]]:
    with TxnAdmin(ClientConfig(b.bootstrap)) as admin:
        found = admin.describe_many(m.transactional_id or "" for m in msgs)
    return [
        (
            found[m.transactional_id or ""].transaction_state,
            found[m.transactional_id or ""].producer_epoch,
        )
        for m in msgs
    ]


def test_the_driver_completes_2pc_task_transactions_as_their_producer(
    tpc_broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(tpc_broker.bootstrap, topic_name, 3)
    opts = options(tpc_broker, topic_name)
    msgs = [task(tpc_broker, opts, topic_name, p, batch=0) for p in range(3)]
    leftover = task(tpc_broker, opts, topic_name, 0, batch=0, attempt=1)  # a dead retry
    # The driver crashed after keepPreparedTxn of task 2, before its EndTxn: the
    # transaction stays open under its epoch, and the next commit keeps it again.
    with ProtocolClient(opts.client_config) as p:
        kept = p.keep_prepared(msgs[2].transactional_id or "")
    assert (kept.error, kept.ongoing_producer_epoch) == (ErrorCode.none, msgs[2].producer_epoch)
    assert end_offsets(tpc_broker.bootstrap, topic_name, 3, READ_COMMITTED) == [0, 0, 0]

    commit_batch(opts, msgs, 0)

    # keepPreparedTxn bumps once (twice for task 2), the task's own EndTxn v5 once more; an
    # EndTxn on the task's behalf would have left the epoch where the task had it.
    assert states(tpc_broker, msgs) == [
        ("CompleteCommit", msgs[0].producer_epoch + 2),
        ("CompleteCommit", msgs[1].producer_epoch + 2),
        ("CompleteCommit", msgs[2].producer_epoch + 3),
    ]
    # The dead retry's transaction (no timeout!) was aborted by a 2PC InitProducerId: the
    # fence's abort (+2 for a TV2 transaction) and the retried init (+1).
    assert states(tpc_broker, [leftover]) == [("Empty", leftover.producer_epoch + 3)]
    # Partition 0: the task's record, the dead retry's, a COMMIT and an ABORT marker.
    assert end_offsets(tpc_broker.bootstrap, topic_name, 3, READ_COMMITTED) == [4, 2, 2]
    assert len(read_all(tpc_broker.bootstrap, topic_name, 3, "read_committed")) == 3

    # Spark may commit the same batch again: nothing changes, nothing is bumped.
    commit_batch(opts, msgs, 0)
    assert [s[1] for s in states(tpc_broker, msgs)] == [
        msgs[0].producer_epoch + 2,
        msgs[1].producer_epoch + 2,
        msgs[2].producer_epoch + 3,
    ]
    with TxnAdmin(opts.client_config) as admin:
        assert all(
            is_committed(
                admin.describe_txn(m.transactional_id or ""), m.producer_id, m.producer_epoch
            )
            for m in msgs
        )


def test_an_aborted_batch_of_2pc_task_transactions_stays_invisible(
    tpc_broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(tpc_broker.bootstrap, topic_name, 2)
    opts = options(tpc_broker, topic_name)
    msgs = [task(tpc_broker, opts, topic_name, p, batch=4) for p in range(2)]
    abort_batch(opts, msgs, 4)
    assert states(tpc_broker, msgs) == [
        ("CompleteAbort", msgs[0].producer_epoch + 2),
        ("CompleteAbort", msgs[1].producer_epoch + 2),
    ]
    assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_COMMITTED) == [2, 2]
    assert read_all(tpc_broker.bootstrap, topic_name, 2, "read_committed") == []
