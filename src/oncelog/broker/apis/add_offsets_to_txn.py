"""AddOffsetsToTxn (API 25): a group's offsets partition joins the transaction (KIP-98)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, denied
from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

FENCED_SINCE = 2


async def add_offsets_to_txn(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    reply = await broker.txn.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
    )
    return make(
        ctx.response.AddOffsetsToTxnResponse,
        error_code=fenced_for_version(reply.error, ctx.version, FENCED_SINCE),
    )


def authorize_add_offsets_to_txn(ctx: RequestContext, req: Any) -> Any | None:
    """TransactionalId WRITE, then Group READ."""
    if not ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return denied(ctx, ErrorCode.transactional_id_authorization_failed)
    if not ctx.authorized(Op.READ, Res.GROUP, req.group_id):
        return denied(ctx, ErrorCode.group_authorization_failed)
    return None


API = ApiSpec(
    ApiKey.ADD_OFFSETS_TO_TXN, 0, 3, add_offsets_to_txn, authorize=authorize_add_offsets_to_txn
)
