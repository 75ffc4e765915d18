"""CreatePartitions (API 37): grow a topic's partition count."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.topic_creation import OFF_LOOP_PARTITIONS, add_partitions
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def create_partitions(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    results = []
    for t in req.topics:
        code, message = ErrorCode.none, None
        try:
            if not ctx.authorized(Op.ALTER, Res.TOPIC, t.name):
                raise TopicError(ErrorCode.topic_authorization_failed, "Topic ALTER denied")
            if t.assignments is not None and any(
                tuple(a.broker_ids) != (broker.node_id,) for a in t.assignments
            ):
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Replica assignments must name only broker {broker.node_id}",
                )
            await add_partitions(
                broker.topics,
                t.name,
                t.count,
                validate_only=req.validate_only,
                off_loop_above=OFF_LOOP_PARTITIONS,
            )
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append(
            make(r.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=message)
        )
    return make(r.CreatePartitionsResponse, results=tuple(results))


API = ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, create_partitions)
