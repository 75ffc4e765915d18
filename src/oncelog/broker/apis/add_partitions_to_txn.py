"""AddPartitionsToTxn (API 24): partitions join a producer's transaction; v4+
batches transactions and lets brokers verify membership (KIP-890 part 1)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized, denied
from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.protocol.txn_wire import encode_add_partitions_v3_and_below
from oncelog.txn.messages import Reply

FENCED_SINCE = 2


def _codes(topics: Any, reply: Reply, version: int) -> list[tuple[str, list[tuple[int, Any]]]]:
    """Each topic's (partition, error code) pairs, as the request listed them."""
    errors = reply.partition_errors
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            code = reply.error if errors is None else errors.get((t.name, p), reply.error)
            parts.append((p, fenced_for_version(code, version, FENCED_SINCE)))
        out.append((t.name, parts))
    return out


def _partition_results(r: Any, topics: Any, reply: Reply, ctx: RequestContext) -> tuple[Any, ...]:
    return tuple(
        make(
            r.AddPartitionsToTxnTopicResult,
            name=name,
            results_by_partition=tuple(
                make(
                    r.AddPartitionsToTxnPartitionResult,
                    partition_index=p,
                    partition_error_code=code,
                )
                for p, code in parts
            ),
        )
        for name, parts in _codes(topics, reply, ctx.version)
    )


async def _add_partitions(
    ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: Any, verify_only: bool
) -> Reply:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    return await ctx.broker.txn.add_partitions(
        txn_id, pid, epoch, partitions, verify_only=verify_only
    )


async def add_partitions_to_txn(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if hasattr(req, "transactions"):  # v4+: batched, from brokers (verify_only)
        results = []
        for txn in req.transactions:
            reply = await _add_partitions(
                ctx,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.topics,
                txn.verify_only,
            )
            results.append(
                make(
                    r.AddPartitionsToTxnResult,
                    transactional_id=txn.transactional_id,
                    topic_results=_partition_results(r, txn.topics, reply, ctx),
                )
            )
        return make(
            r.AddPartitionsToTxnResponse,
            error_code=ErrorCode.none,
            results_by_transaction=tuple(results),
        )
    reply = await _add_partitions(
        ctx,
        req.v3_and_below_transactional_id,
        req.v3_and_below_producer_id,
        req.v3_and_below_producer_epoch,
        req.v3_and_below_topics,
        False,
    )
    # Encoded by hand (txn_wire): clients send one or two per transaction.
    return encode_add_partitions_v3_and_below(
        ctx.version, _codes(req.v3_and_below_topics, reply, ctx.version)
    )


# Transaction version 1 only: versions that signal TV2 (KIP-890 part 2) are not advertised.
def authorize_add_partitions_to_txn(ctx: RequestContext, req: Any) -> Any | None:
    """v0-3 (clients): TransactionalId WRITE, then Topic WRITE on every topic; one
    unauthorized topic fails it and the others get OPERATION_NOT_ATTEMPTED.
    v4+ (broker verification): Cluster CLUSTER_ACTION."""
    if hasattr(req, "transactions"):
        if cluster_authorized(ctx, Op.CLUSTER_ACTION):
            return None
        return denied(ctx, ErrorCode.cluster_authorization_failed, results_by_transaction=())
    topics = req.v3_and_below_topics
    if not ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        codes = {t.name: ErrorCode.transactional_id_authorization_failed for t in topics}
    else:
        codes = {
            t.name: ErrorCode.topic_authorization_failed
            for t in topics
            if not ctx.authorized(Op.WRITE, Res.TOPIC, t.name)
        }
        if not codes:
            return None
    errors = {
        (t.name, p): codes.get(t.name, ErrorCode.operation_not_attempted)
        for t in topics
        for p in t.partitions
    }
    reply = Reply(ErrorCode.none, partition_errors=errors)
    return make(
        ctx.response.AddPartitionsToTxnResponse,
        results_by_topic_v3_and_below=_partition_results(ctx.response, topics, reply, ctx),
    )


API = ApiSpec(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    0,
    4,
    add_partitions_to_txn,
    authorize=authorize_add_partitions_to_txn,
)
