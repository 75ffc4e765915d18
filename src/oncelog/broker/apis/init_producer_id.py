"""InitProducerId (API 22): a producer id for idempotence, or a transactional
producer's id and epoch from the transaction coordinator (KIP-98, KIP-360)."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

FENCED_SINCE = 4


async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    broker = ctx.broker
    reply = await broker.txn.init_producer_id(
        req.transactional_id,
        int(req.transaction_timeout.total_seconds() * 1000),
        getattr(req, "producer_id", -1),
        getattr(req, "producer_epoch", -1),
    )
    return make(
        r.InitProducerIdResponse,
        error_code=fenced_for_version(reply.error, ctx.version, FENCED_SINCE),
        producer_id=reply.producer_id if reply.ok else -1,
        producer_epoch=reply.producer_epoch if reply.ok else -1,
    )


# Transaction version 1 only: versions that signal TV2 (KIP-890 part 2) are not advertised.
API = ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 4, init_producer_id)
