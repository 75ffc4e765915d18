"""TxnOffsetCommit (API 28): offsets committed inside a producer's transaction
(KIP-98), fenced by group generation from v3 on (KIP-447)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.commit_shapes import commit_response, commit_topics
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.clock import now_ms
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.txn.metadata import TxnState


async def txn_offset_commit(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    groups = broker.groups
    topics = commit_topics(req)
    # KIP-98: the producer must hold the transaction and have added the group's offsets partition.
    meta = broker.txn.coordinator.describe(req.transactional_id)
    error = ErrorCode.none
    if meta is None or meta.producer_id != req.producer_id:
        error = ErrorCode.invalid_producer_id_mapping
    elif req.producer_epoch != meta.producer_epoch:
        error = ErrorCode.producer_fenced if ctx.version >= 2 else ErrorCode.invalid_producer_epoch
    elif (
        meta.state is not TxnState.ONGOING
        or ("__consumer_offsets", groups.coordinator.partition_for(req.group_id))
        not in meta.partitions
    ):
        error = ErrorCode.invalid_txn_state
    if error != ErrorCode.none:
        reply = gm.CommitReply(
            tuple((t, tuple((p.partition, error) for p in parts)) for t, parts in topics)
        )
    else:
        reply = await groups.call(
            groups.coordinator.txn_offset_commit(
                gm.TxnOffsetCommitRequest(
                    transactional_id=req.transactional_id,
                    group_id=req.group_id,
                    producer_id=req.producer_id,
                    producer_epoch=req.producer_epoch,
                    topics=topics,
                    generation_id=getattr(req, "generation_id", -1),
                    member_id=getattr(req, "member_id", ""),
                    group_instance_id=getattr(req, "group_instance_id", None),
                ),
                now_ms(),
            )
        )
    return commit_response(ctx.response, "TxnOffsetCommit", reply)


API = ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, txn_offset_commit)
