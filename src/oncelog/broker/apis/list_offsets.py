"""ListOffsets (API 2): earliest, latest, max-timestamp or by-timestamp offsets."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import READ_COMMITTED
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def list_offsets(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    dupes = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
    topics = []
    for t in req.topics:
        parts = []
        describable = ctx.authorized(Op.DESCRIBE, Res.TOPIC, t.name)
        for p in t.partitions:
            code, ts, offset = ErrorCode.none, -1, -1
            part = broker.topics.partition(t.name, p.partition_index)
            if not describable:
                code = ErrorCode.topic_authorization_failed
            elif dupes[(t.name, p.partition_index)] > 1:
                code = ErrorCode.invalid_request
            elif part is None:
                code = ErrorCode.unknown_topic_or_partition
            elif getattr(p, "current_leader_epoch", -1) > 0:
                code = ErrorCode.unknown_leader_epoch
            elif p.timestamp == EARLIEST:
                offset = part.log_start_offset
            elif p.timestamp == LATEST:
                offset = part.last_stable_offset if committed else part.high_watermark
            elif p.timestamp == MAX_TIMESTAMP:
                ts, offset = part.max_timestamp()
            elif p.timestamp >= 0:
                found = part.offset_for_timestamp(p.timestamp)
                if found is not None:
                    offset, ts = found
                    bound = part.last_stable_offset if committed else part.high_watermark
                    if offset >= bound:
                        offset, ts = -1, -1
            else:
                code = ErrorCode.invalid_request
            parts.append(
                make(
                    r.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=0 if code == ErrorCode.none else -1,
                )
            )
        topics.append(make(r.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return make(r.ListOffsetsResponse, topics=tuple(topics))


API = ApiSpec(ApiKey.LIST_OFFSETS, 1, 7, list_offsets)
