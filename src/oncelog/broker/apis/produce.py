"""Produce (API 0): map a request to the partition writer and its results to a response.

The append path itself (validation, KIP-890 check, append, durable acks) is
``broker.partition_writer``; records are never decoded.

v10 (KIP-951) only adds the current leader and node endpoints, which Kafka fills for
NOT_LEADER_OR_FOLLOWER, an error a single-node broker never returns. v11 only lets a
client receive KIP-890's TRANSACTION_ABORTABLE. v12 is transaction version 2 (KIP-890 part
2): a transactional batch for a partition its transaction does not hold yet adds the
partition implicitly (the coordinator's AddPartitionsToTxn on the client's behalf, as Kafka's
AddPartitionsToTxnManager does) and is then appended. v13 (topic ids) is not served here.
"""

from __future__ import annotations

import logging
from typing import Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.partition_writer import PartitionData, ProduceError, ProducePlan
from oncelog.broker.request import NO_RESPONSE, CloseConnection, Deferred, RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.protocol.produce_wire import encode_produce_success
from oncelog.storage.unified_log import AppendResult
from oncelog.txn.metadata import TV_2

log = logging.getLogger(__name__)

IMPLICIT_ADD_SINCE = 12

# What an implicit add's coordinator error becomes in a Produce response: Kafka's produce
# path answers a retriable NOT_ENOUGH_REPLICAS while the coordinator is busy, and the
# epoch error every Produce version knows.
_ADD_ERROR_FOR_PRODUCE = {
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
}

# Kinds of refused partitions, each logged once per window of the client fault log. An
# out-of-order sequence is its own kind: a pipelined idempotent producer can draw a burst of
# them behind one retriable error, and each one says which producer, epoch and sequences.
_FAULT_KIND = {
    ErrorCode.out_of_order_sequence_number: "out-of-order sequences",
}


def produce(ctx: RequestContext, req: Any) -> Any:
    writer = ctx.broker.writer
    # Topic WRITE is checked per topic, as Kafka answers TOPIC_AUTHORIZATION_FAILED per
    # partition; denied partitions are never looked at.
    denied = {
        t.name: _WRITE_DENIED
        for t in req.topic_data
        if not ctx.authorized(Op.WRITE, Res.TOPIC, t.name)
    }
    entries = [
        PartitionData(t.name, p.index, p.records) for t in req.topic_data for p in t.partition_data
    ]
    bytes_in = ctx.broker.stats.bytes_in
    for entry in entries:  # per partition, never per record
        if entry.topic not in denied:
            bytes_in[entry.topic] += len(entry.records) if entry.records is not None else 0
    plan = writer.prepare(
        entries,
        acks=req.acks,
        produce_version=ctx.version,
        transactional_id=req.transactional_id,
        implicit_add=ctx.version >= IMPLICIT_ADD_SINCE and req.transactional_id is not None,
        refused_topics=denied,
    )
    adds = plan.pending_adds()
    if not adds:
        outcome = writer.commit(plan)
        if not outcome.unsynced:
            return _response(ctx, req, outcome.results)

        async def after_fsync() -> Any:
            return _response(ctx, req, await writer.until_durable(outcome))

        return Deferred(after_fsync())

    async def after_adds() -> Any:
        await _add_implicitly(ctx, req.transactional_id, plan, adds)
        outcome = writer.commit(plan, after_wait=True)
        return _response(ctx, req, await writer.until_durable(outcome))

    return Deferred(after_adds())


_WRITE_DENIED = ProduceError(ErrorCode.topic_authorization_failed, "Topic WRITE denied")


async def _add_implicitly(
    ctx: RequestContext,
    transactional_id: str,
    plan: ProducePlan,
    adds: dict[tuple[int, int], list[int]],
) -> None:
    """Transaction version 2: add the plan's pending partitions to their producer's
    transaction, before anything of the request is appended (Kafka's
    AddPartitionsToTxnManager); a partition the coordinator refuses is answered with
    the produce form of its error and not appended."""
    for (pid, epoch), indexes in adds.items():
        parts = [plan.partition_of(i) for i in indexes]
        reply = await ctx.broker.txn.add_partitions(
            transactional_id, pid, epoch, parts, transaction_version=TV_2
        )
        for i, tp in zip(indexes, parts, strict=True):
            code = (reply.partition_errors or {}).get(tp, reply.error)
            if code is not ErrorCode.none:
                plan.refuse(
                    i,
                    ProduceError(
                        _ADD_ERROR_FOR_PRODUCE.get(code, code),
                        f"implicit AddPartitionsToTxn for {tp[0]}-{tp[1]} failed: {code.name}",
                    ),
                )


def _response(ctx: RequestContext, req: Any, outcome: list[AppendResult | ProduceError]) -> Any:
    if req.acks != 0 and all(type(res) is AppendResult for res in outcome):
        # The common answer, every partition appended: encoded by hand, as building kio's
        # dataclasses for it cost more than the rest of the response path.
        results = iter(outcome)
        return encode_produce_success(
            ctx.version,
            [
                (t.name, [_success(p.index, next(results)) for p in t.partition_data])
                for t in req.topic_data
            ],
        )
    r = ctx.response
    results = iter(outcome)
    any_error = False
    topics = []
    for t in req.topic_data:
        parts = []
        for p in t.partition_data:
            res = next(results)
            if isinstance(res, ProduceError):
                any_error = True
                if res.error_code != ErrorCode.topic_authorization_failed:
                    ctx.broker.client_faults.note(
                        _FAULT_KIND.get(res.error_code, "refused produce partitions"),
                        logging.INFO,
                        "produce to %s-%d from %s rejected: %s %s",
                        t.name,
                        p.index,
                        ctx.peer,
                        res.error_code.name,
                        res.message,
                    )
                parts.append(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=res.error_code,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=res.log_start_offset,
                        record_errors=_record_errors(r, res),
                        error_message=res.message,
                    )
                )
                continue
            parts.append(
                make(
                    r.PartitionProduceResponse,
                    index=p.index,
                    error_code=ErrorCode.none,
                    base_offset=res.base_offset,
                    log_append_time=tz_aware_from_i64(i64(res.log_append_time))
                    if res.log_append_time >= 0
                    else None,
                    log_start_offset=res.log_start_offset,
                    record_errors=(),
                    error_message=None,
                )
            )
        topics.append(make(r.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
    if req.acks == 0:
        if any_error:  # Kafka's only way to tell an acks=0 producer about an error
            raise CloseConnection("error on acks=0 produce")
        return NO_RESPONSE
    return make(r.ProduceResponse, responses=tuple(topics))


def _record_errors(r: Any, error: ProduceError) -> tuple[Any, ...]:
    """KIP-467 (Produce v8+): each record that failed the batch, by its index."""
    entry = getattr(r, "BatchIndexAndErrorMessage", None)
    if entry is None:
        return ()
    return tuple(
        make(entry, batch_index=i32(index), batch_index_error_message=message)
        for index, message in error.record_errors
    )


def _success(index: int, res: Any) -> tuple[int, int, int, int]:
    return index, res.base_offset, res.log_append_time, res.log_start_offset


def authorize_produce(ctx: RequestContext, req: Any) -> Any | None:
    """A transactional produce needs TransactionalId WRITE; else every partition fails."""
    txn_id = req.transactional_id
    if txn_id is None or ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        return None
    if req.acks == 0:
        raise CloseConnection("TransactionalId WRITE denied on an acks=0 produce")
    r = ctx.response
    code = ErrorCode.transactional_id_authorization_failed
    return make(
        r.ProduceResponse,
        responses=tuple(
            make(
                r.TopicProduceResponse,
                name=t.name,
                partition_responses=tuple(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    )
                    for p in t.partition_data
                ),
            )
            for t in req.topic_data
        ),
    )


API = ApiSpec(ApiKey.PRODUCE, 3, 12, produce, authorize=authorize_produce)
