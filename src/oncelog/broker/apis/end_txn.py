"""EndTxn (API 26): a producer commits or aborts its transaction (KIP-98).

v4 only adds TRANSACTION_ABORTABLE to the codes a client knows (the coordinator never
returns it here). v5 is transaction version 2 (KIP-890 part 2): the coordinator bumps the
epoch and the response carries the producer id and epoch of the next transaction.
"""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import transactional_id_write_rule
from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.txn_wire import encode_end_txn
from oncelog.txn.metadata import TV_0, TV_2

FENCED_SINCE = 2
TV2_SINCE = 5


async def end_txn(ctx: RequestContext, req: Any) -> Any:
    reply = await ctx.broker.txn.end_txn(
        req.transactional_id,
        req.producer_id,
        req.producer_epoch,
        req.committed,
        transaction_version=TV_2 if ctx.version >= TV2_SINCE else TV_0,
    )
    # Encoded by hand (txn_wire): one per transaction, and kio's writer cost as much as
    # the coordinator work behind it.
    return encode_end_txn(
        ctx.version,
        fenced_for_version(reply.error, ctx.version, FENCED_SINCE),
        reply.producer_id,
        reply.producer_epoch,
    )


API = ApiSpec(ApiKey.END_TXN, 0, 5, end_txn, authorize=transactional_id_write_rule)
