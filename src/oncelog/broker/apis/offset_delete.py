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
    unreadable = {t.name for t in req.topics if not ctx.authorized(Op.READ, Res.TOPIC, t.name)}
    reply = await groups.delete_offsets(
        gm.OffsetDeleteRequest(
            req.group_id,
            tuple(
                (t.name, tuple(p.partition_index for p in t.partitions))
                for t in req.topics
                if t.name not in unreadable
            ),
        )
    )
    denied = ErrorCode.topic_authorization_failed
    topics = list(reply.topics) + [
        (t.name, tuple((p.partition_index, denied) for p in t.partitions))
        for t in req.topics
        if t.name in unreadable
    ]
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
