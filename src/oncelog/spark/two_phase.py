"""Write tasks with two-phase-commit transactions (KIP-939), executor side.

With ``exactlyOnce.twoPhaseCommit`` = ``auto`` (the default) or ``true``, a write task
opens its transaction with oncelog's own producer (:mod:`oncelog.client.producer`):
InitProducerId v6 with ``enable2Pc``, the rows in batches (Produce, acks=all, idempotent
sequences), a flush, and the transaction left open: *prepared*. A 2PC transaction never
times out, and the driver completes it as its own producer (InitProducerId
``keepPreparedTxn`` + EndTxn, :func:`oncelog.spark.commit.end_task_txn`) instead of an
EndTxn on the task producer's behalf.

A broker without InitProducerId v6, or one that refuses ``enable2Pc``
(``transaction.two.phase.commit.enable=false``, or no TWO_PHASE_COMMIT ACL: Kafka answers
both with TRANSACTIONAL_ID_AUTHORIZATION_FAILED) raises :class:`TwoPhaseCommitUnavailable`
before any row is written; with ``auto`` the task then takes the librdkafka path, and this
Python worker remembers the refusal for :data:`REFUSAL_TTL_S` so that its next tasks do not
ask again. With ``true`` the task fails with that reason.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from oncelog.client.producer import (
    ProducerSettings,
    TransactionalProducer,
    TwoPhaseCommitUnavailable,
)
from oncelog.client.retry import RetryPolicy
from oncelog.client.transactions import is_two_phase
from oncelog.spark.commit import is_open
from oncelog.spark.hooks import point, trace
from oncelog.spark.options import WriteOptions
from oncelog.spark.pool import pooled_txn_admin
from oncelog.spark.rows import WriteError, as_bytes, bad_partition, columns

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("oncelog.spark")

REFUSAL_TTL_S = 300.0
# (client config) -> when this worker last saw the broker refuse a 2PC transaction.
_refused: dict[str, float] = {}

__all__ = ["TwoPhaseCommitUnavailable", "prepare", "refused", "wanted"]


def _key(opts: WriteOptions) -> str:
    return repr(opts.client_config)


def wanted(opts: WriteOptions) -> bool:
    """Should this task try a two-phase-commit transaction?"""
    if opts.two_phase_commit == "false":
        return False
    if opts.two_phase_commit == "true":
        return True
    at = _refused.get(_key(opts))
    return at is None or time.monotonic() - at > REFUSAL_TTL_S


def refused(opts: WriteOptions, exc: TwoPhaseCommitUnavailable) -> None:
    """``auto``: the broker refused; this worker's tasks use librdkafka for a while.
    Logged at DEBUG: on a broker without the KIP-939 grant this is the expected path,
    and the EndTxn path is just as exactly-once."""
    if _key(opts) not in _refused:
        log.debug("exactlyOnce.twoPhaseCommit=auto: %s; task transactions use the EndTxn path", exc)
    _refused[_key(opts)] = time.monotonic()


def _write(producer: TransactionalProducer, batch: pa.RecordBatch, opts: WriteOptions) -> int:
    if batch.num_rows == 0:
        return 0
    cols = columns(batch, opts)
    send = producer.send
    for i in range(cols.n):
        topic = cols.topic(i)
        partition = None
        if cols.partitions is not None and cols.partitions[i] is not None:
            partition = int(cols.partitions[i])
            count = producer.partitions(topic)
            if not 0 <= partition < count:
                raise bad_partition(topic, partition, count)
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if cols.headers is not None and cols.headers[i]:
            headers = tuple((h["key"], as_bytes(h["value"])) for h in cols.headers[i])
        send(topic, partition, as_bytes(cols.keys[i]), as_bytes(cols.values[i]), headers)
    return cols.n


def prepare(
    opts: WriteOptions,
    txn_id: str,
    batches: Iterator[pa.RecordBatch],
    *,
    kill_batch: int | None = None,
) -> tuple[int, int, int]:
    """Write every row in one two-phase-commit transaction of ``txn_id``, flush it and leave
    it prepared: (records, producer id, epoch). The caller passes at least one row.
    Raises :class:`TwoPhaseCommitUnavailable` before consuming ``batches`` when the broker
    cannot open a 2PC transaction."""
    producer = TransactionalProducer(
        opts.client_config,
        txn_id,
        two_phase=True,
        transaction_timeout=datetime.timedelta(milliseconds=opts.transaction_timeout_ms),
        settings=ProducerSettings.from_conf(opts.producer_conf),
        client_id=f"oncelog-spark-{txn_id}",
    )
    with producer:
        pid, epoch = producer.init_transactions()
        trace(f"2pc task {txn_id}: pid={pid} epoch={epoch}")
        producer.begin_transaction()
        try:
            records = sum(_write(producer, batch, opts) for batch in batches)
            producer.prepare()
            with pooled_txn_admin(opts.client_config) as txns:
                state = txns.describe_txn(txn_id)
            if not is_open(state, pid, epoch) or not is_two_phase(state):
                got = (
                    "unknown"
                    if state is None
                    else f"{state.transaction_state} pid={state.producer_id} "
                    f"epoch={state.producer_epoch}"
                )
                raise WriteError(
                    f"two-phase-commit transaction {txn_id!r} (pid={pid} epoch={epoch}) was "
                    f"fenced or ended by another producer while this task wrote it ({got})"
                )
            if kill_batch is not None:
                point("task-after-flush", kill_batch)
        except BaseException:
            _abort_quietly(producer)
            raise
        log.info(
            "task transaction %s prepared (two-phase commit): %d records in %d Produce requests",
            txn_id,
            records,
            producer.requests,
        )
    return records, pid, epoch


def _abort_quietly(producer: TransactionalProducer) -> None:
    """After a failure: abort the task's own transaction now (best effort), since a 2PC
    transaction never times out; the driver's clean-up fences it otherwise."""
    producer.policy = RetryPolicy(deadline_s=10.0)
    try:
        producer.abort_transaction()
    except Exception as exc:  # noqa: BLE001 - best effort
        log.info("abort of %s after a failed task: %s", producer.transactional_id, exc)
