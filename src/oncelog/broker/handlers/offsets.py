"""ListOffsets and DeleteRecords."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.server import RequestContext
from oncelog.protocol.api_keys import BROKER_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make
from oncelog.storage.log import OffsetOutOfRangeError

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1


def list_offsets(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    dupes = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, ts, offset = ErrorCode.none, -1, -1
            part = broker.topics.partition(t.name, p.partition_index)
            if dupes[(t.name, p.partition_index)] > 1:
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


def delete_records(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, low = ErrorCode.none, -1
            part = broker.topics.partition(t.name, p.partition_index)
            if part is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                target = part.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > part.high_watermark:
                    code = ErrorCode.offset_out_of_range
                else:
                    try:
                        low = part.delete_records_before(target)
                    except OffsetOutOfRangeError:
                        code = ErrorCode.offset_out_of_range
            parts.append(make(r.DeleteRecordsPartitionResult, partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(make(r.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return make(r.DeleteRecordsResponse, topics=tuple(topics))


def register(broker: Broker) -> None:
    v = BROKER_API_VERSIONS
    broker.register(ApiKey.LIST_OFFSETS, v[ApiKey.LIST_OFFSETS], list_offsets)
    broker.register(ApiKey.DELETE_RECORDS, v[ApiKey.DELETE_RECORDS], delete_records)
