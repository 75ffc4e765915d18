"""OffsetDelete (API 47, KIP-496): delete a group's offsets for unsubscribed topics."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, denied
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def offset_delete(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    # Kafka's KafkaApis.handleOffsetDeleteRequest: READ on the topic, then the topic and
    # partition must exist (UNKNOWN_TOPIC_OR_PARTITION), before the coordinator is asked.
    registry = ctx.broker.topics
    valid: list[tuple[str, tuple[int, ...]]] = []
    refused: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    for t in req.topics:
        indexes = tuple(p.partition_index for p in t.partitions)
        if not ctx.authorized(Op.READ, Res.TOPIC, t.name):
            refused.append(
                (t.name, tuple((i, ErrorCode.topic_authorization_failed) for i in indexes))
            )
            continue
        count = registry.partition_count(t.name) or 0
        known = tuple(i for i in indexes if 0 <= i < count)
        unknown = tuple(
            (i, ErrorCode.unknown_topic_or_partition) for i in indexes if not 0 <= i < count
        )
        if known:
            valid.append((t.name, known))
        if unknown:
            refused.append((t.name, unknown))
    reply = await groups.delete_offsets(gm.OffsetDeleteRequest(req.group_id, tuple(valid)))
    topics = list(reply.topics) + refused
    return make(
        r.OffsetDeleteResponse,
        error_code=reply.error,
        topics=tuple(
            make(
                r.OffsetDeleteResponseTopic,
                name=t,
                partitions=tuple(
                    make(r.OffsetDeleteResponsePartition, partition_index=p, error_code=e)
                    for p, e in parts
                ),
            )
            for t, parts in topics
        ),
    )


def authorize_offset_delete(ctx: RequestContext, req: Any) -> Any | None:
    """Group DELETE (Topic READ is checked per topic in the handler)."""
    if not ctx.authorized(Op.DELETE, Res.GROUP, req.group_id):
        return denied(ctx, ErrorCode.group_authorization_failed, topics=())
    return None


API = ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, offset_delete, authorize=authorize_offset_delete)
