"""ListTransactions (API 66, KIP-664): transactional ids by state, producer id and age."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.txn.metadata import TxnState


def list_transactions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    known = {s.kafka_name for s in TxnState}
    unknown = tuple(s for s in req.state_filters if s not in known)
    wanted = [s for s in req.state_filters if s in known]
    duration = getattr(req, "duration_filter", -1)
    if req.state_filters and not wanted:
        metas = []
    else:
        metas = ctx.broker.txn.list_transactions(
            wanted or None,
            req.producer_id_filters or None,
            duration if duration >= 0 else None,
        )
    return make(
        r.ListTransactionsResponse,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(
            make(
                r.TransactionState,
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.kafka_name,
            )
            for m in metas
            if ctx.authorized(
                Op.DESCRIBE, Res.TRANSACTIONAL_ID, m.transactional_id, log_denied=False
            )
        ),
    )


API = ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 1, list_transactions)
