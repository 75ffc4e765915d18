"""DescribeProducers (API 61, KIP-664): a partition's active producers and open transactions."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_producers(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    topics = []
    for t in req.topics:
        parts = []
        readable = ctx.authorized(Op.READ, Res.TOPIC, t.name)
        for p in t.partition_indexes:
            part = ctx.broker.topics.partition(t.name, p)
            if part is None or not readable:
                parts.append(
                    make(
                        r.PartitionResponse,
                        partition_index=p,
                        error_code=ErrorCode.topic_authorization_failed
                        if not readable
                        else ErrorCode.unknown_topic_or_partition,
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            producers = tuple(
                make(
                    r.ProducerState,
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_sequence,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=-1
                    if e.current_txn_first_offset is None
                    else e.current_txn_first_offset,
                )
                for e in part.producer_state.producers()
            )
            parts.append(
                make(
                    r.PartitionResponse,
                    partition_index=p,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(make(r.TopicResponse, name=t.name, partitions=tuple(parts)))
    return make(r.DescribeProducersResponse, topics=tuple(topics))


API = ApiSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, describe_producers)
