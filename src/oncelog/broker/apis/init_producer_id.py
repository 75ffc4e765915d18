"""InitProducerId (API 22): a producer id for idempotence, or a transactional
producer's id and epoch from the transaction coordinator (KIP-98, KIP-360); v6 adds
two-phase commit (KIP-939: ``enable2Pc``, ``keepPreparedTxn`` and the kept transaction's
``OngoingTxnProducerId``/``OngoingTxnProducerEpoch``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized, denied
from oncelog.broker.apis.compat import fenced_for_version
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

FENCED_SINCE = 4
TWO_PHASE_COMMIT_SINCE = 6


async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    broker = ctx.broker
    reply = await broker.txn.init_producer_id(
        req.transactional_id,
        int(req.transaction_timeout.total_seconds() * 1000),
        getattr(req, "producer_id", -1),
        getattr(req, "producer_epoch", -1),
        enable_2pc=getattr(req, "enable2_pc", False),
        keep_prepared_txn=getattr(req, "keep_prepared_txn", False),
    )
    fields: dict[str, Any] = {}
    if ctx.version >= TWO_PHASE_COMMIT_SINCE:
        fields = {
            "ongoing_txn_producer_id": reply.ongoing_producer_id if reply.ok else -1,
            "ongoing_txn_producer_epoch": reply.ongoing_producer_epoch if reply.ok else -1,
        }
    return make(
        r.InitProducerIdResponse,
        error_code=fenced_for_version(reply.error, ctx.version, FENCED_SINCE),
        producer_id=reply.producer_id if reply.ok else -1,
        producer_epoch=reply.producer_epoch if reply.ok else -1,
        **fields,
    )


def authorize_init_producer_id(ctx: RequestContext, req: Any) -> Any | None:
    """TransactionalId WRITE, and TWO_PHASE_COMMIT too for enable2Pc (KIP-939); an
    idempotent producer needs Cluster IDEMPOTENT_WRITE or WRITE on some topic (Kafka >= 2.8,
    KIP-679)."""
    if req.transactional_id is not None:
        if ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id) and (
            not getattr(req, "enable2_pc", False)
            or ctx.authorized(Op.TWO_PHASE_COMMIT, Res.TRANSACTIONAL_ID, req.transactional_id)
        ):
            return None
        return denied(
            ctx, ErrorCode.transactional_id_authorization_failed, producer_id=-1, producer_epoch=-1
        )
    if cluster_authorized(
        ctx, Op.IDEMPOTENT_WRITE, log_denied=False
    ) or ctx.broker.authorizer.authorize_any(ctx.session, Op.WRITE, Res.TOPIC):
        return None
    return denied(ctx, ErrorCode.cluster_authorization_failed, producer_id=-1, producer_epoch=-1)


# v5 only lets a client receive TRANSACTION_ABORTABLE (KIP-890), which this API never
# returns; TV2 clients send it. v6 is KIP-939's two-phase commit.
API = ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 6, init_producer_id, authorize=authorize_init_producer_id)
