"""DeleteRecords (API 21): raise a partition's log start offset."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def delete_records(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    topics = []
    for t in req.topics:
        parts = []
        deletable = ctx.authorized(Op.DELETE, Res.TOPIC, t.name)
        for p in t.partitions:
            code, low = ErrorCode.none, -1
            if not deletable:
                code = ErrorCode.topic_authorization_failed
            else:
                try:
                    low = broker.topics.delete_records(t.name, p.partition_index, p.offset)
                except TopicError as exc:
                    code = exc.code
            parts.append(
                make(
                    r.DeleteRecordsPartitionResult,
                    partition_index=p.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(make(r.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return make(r.DeleteRecordsResponse, topics=tuple(topics))


API = ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, delete_records)
