"""WriteTxnMarkers (API 27): admin tools abort hanging transactions (KIP-664)."""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.txn.messages import TxnMarker


async def write_txn_markers(ctx: RequestContext, req: Any) -> Any:
    """Used by admin tools to abort hanging transactions (KIP-664)."""
    broker = ctx.broker
    r = ctx.response
    results = []
    for marker in req.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for p in t.partition_indexes:
                code = await broker.txn.write_marker(
                    t.name,
                    p,
                    TxnMarker(
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                    ),
                )
                if code is not ErrorCode.none:
                    broker.client_faults.note(
                        "refused transaction markers",
                        logging.INFO,
                        "WriteTxnMarkers for %s-%d (producer %d) from %s refused: %s",
                        t.name,
                        p,
                        marker.producer_id,
                        ctx.peer,
                        code.name,
                    )
                parts.append(
                    make(r.WritableTxnMarkerPartitionResult, partition_index=p, error_code=code)
                )
            topics.append(
                make(r.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(parts))
            )
        results.append(
            make(r.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics))
        )
    return make(r.WriteTxnMarkersResponse, markers=tuple(results))


def authorize_write_txn_markers(ctx: RequestContext, req: Any) -> Any | None:
    """Cluster CLUSTER_ACTION (the KIP-664 abort tool): every partition fails without it."""
    if cluster_authorized(ctx, Op.CLUSTER_ACTION):
        return None
    r = ctx.response
    code = ErrorCode.cluster_authorization_failed
    return make(
        r.WriteTxnMarkersResponse,
        markers=tuple(
            make(
                r.WritableTxnMarkerResult,
                producer_id=m.producer_id,
                topics=tuple(
                    make(
                        r.WritableTxnMarkerTopicResult,
                        name=t.name,
                        partitions=tuple(
                            make(
                                r.WritableTxnMarkerPartitionResult,
                                partition_index=p,
                                error_code=code,
                            )
                            for p in t.partition_indexes
                        ),
                    )
                    for t in m.topics
                ),
            )
            for m in req.markers
        ),
    )


API = ApiSpec(
    ApiKey.WRITE_TXN_MARKERS, 1, 1, write_txn_markers, authorize=authorize_write_txn_markers
)
