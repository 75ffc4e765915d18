"""TxnOffsetCommit (API 28): offsets committed inside a producer's transaction
(KIP-98), fenced by group generation from v3 on (KIP-447).

v4 only lets a client receive TRANSACTION_ABORTABLE. v5 is transaction version 2 (KIP-890
part 2): the request also does AddOffsetsToTxn's work, so the group's offsets partition is
added to the transaction implicitly before the offsets are checked and written."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.commit_shapes import (
    commit_error_response,
    commit_response,
    commit_topics,
    split_committable,
)
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.txn.metadata import TV_2

IMPLICIT_ADD_SINCE = 5


async def txn_offset_commit(ctx: RequestContext, req: Any) -> Any:
    # The service checks that the producer holds the transaction (KIP-98) and the
    # group generation (KIP-447); only the fenced code depends on the version.
    topics, refused = split_committable(ctx, commit_topics(req))
    if not topics:
        # Nothing left for the coordinator (Kafka answers without asking it).
        return commit_response(ctx.response, "TxnOffsetCommit", gm.CommitReply(refused))
    fenced = ErrorCode.producer_fenced if ctx.version >= 2 else ErrorCode.invalid_producer_epoch
    if ctx.version >= IMPLICIT_ADD_SINCE:
        added = await ctx.broker.txn.add_offsets(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            req.group_id,
            transaction_version=TV_2,
        )
        if not added.ok:
            failed = tuple(
                (name, tuple((p.partition, added.error) for p in parts)) for name, parts in topics
            )
            return commit_response(
                ctx.response, "TxnOffsetCommit", gm.CommitReply(failed + refused)
            )
    reply = await ctx.broker.groups.txn_commit_offsets(
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
        fenced=fenced,
    )
    reply = gm.CommitReply(reply.topics + refused)
    return commit_response(ctx.response, "TxnOffsetCommit", reply)


def authorize_txn_offset_commit(ctx: RequestContext, req: Any) -> Any | None:
    """TransactionalId WRITE, then Group READ; each failure fails every partition."""
    if not ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(Op.READ, Res.GROUP, req.group_id):
        code = ErrorCode.group_authorization_failed
    else:
        return None
    return commit_error_response(ctx, "TxnOffsetCommit", req, code)


API = ApiSpec(
    ApiKey.TXN_OFFSET_COMMIT, 0, 5, txn_offset_commit, authorize=authorize_txn_offset_commit
)
