"""EndTxn (API 26): a producer commits or aborts its transaction (KIP-98)."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import transactional_id_write_rule
from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

FENCED_SINCE = 2


async def end_txn(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    reply = await broker.txn.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed
    )
    return make(
        ctx.response.EndTxnResponse,
        error_code=fenced_for_version(reply.error, ctx.version, FENCED_SINCE),
    )


# Transaction version 1 only: versions that signal TV2 (KIP-890 part 2) are not advertised.
API = ApiSpec(ApiKey.END_TXN, 0, 3, end_txn, authorize=transactional_id_write_rule)
