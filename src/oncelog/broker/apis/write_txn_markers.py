"""WriteTxnMarkers (API 27): admin tools abort hanging transactions (KIP-664)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.clock import now_ms
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.txn.markers import write_marker


def write_txn_markers(ctx: RequestContext, req: Any) -> Any:
    """Used by admin tools to abort hanging transactions (KIP-664)."""
    broker = ctx.broker
    r = ctx.response
    results = []
    now = now_ms()
    for marker in req.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for p in t.partition_indexes:
                part = broker.topics.partition(t.name, p)
                if part is None:
                    code = ErrorCode.unknown_topic_or_partition
                else:
                    code = write_marker(
                        part,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        marker.coordinator_epoch,
                        now_ms=now,
                        only_if_written=False,
                    )
                    if code == ErrorCode.none:
                        broker.notifier.notify((t.name, p))
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
