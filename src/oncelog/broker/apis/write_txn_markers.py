"""WriteTxnMarkers (API 27): admin tools abort hanging transactions (KIP-664)."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.txn.messages import TxnMarker


def write_txn_markers(ctx: RequestContext, req: Any) -> Any:
    """Used by admin tools to abort hanging transactions (KIP-664)."""
    broker = ctx.broker
    r = ctx.response
    results = []
    for marker in req.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for p in t.partition_indexes:
                code = broker.txn.write_marker(
                    t.name,
                    p,
                    TxnMarker(
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                    ),
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


API = ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 1, write_txn_markers)
