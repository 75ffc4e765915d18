"""OffsetCommit (API 8): a group member commits consumed offsets."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.commit_shapes import (
    commit_error_response,
    commit_response,
    commit_topics,
    split_committable,
)
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import duration_ms
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey


async def offset_commit(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    topics, refused = split_committable(ctx, commit_topics(req))
    if not topics:
        # Nothing left for the coordinator (Kafka answers without asking it).
        return commit_response(ctx.response, "OffsetCommit", gm.CommitReply(refused))
    generation = getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1))
    reply = await groups.commit_offsets(
        gm.OffsetCommitRequest(
            group_id=req.group_id,
            topics=topics,
            generation_id=generation,
            member_id=getattr(req, "member_id", ""),
            group_instance_id=getattr(req, "group_instance_id", None),
            retention_time_ms=duration_ms(req.retention_time)
            if hasattr(req, "retention_time")
            else -1,
            api_version=ctx.version,
        )
    )
    reply = gm.CommitReply(reply.topics + refused)
    return commit_response(ctx.response, "OffsetCommit", reply)


# v10 switches to topic ids and is not advertised.
def authorize_offset_commit(ctx: RequestContext, req: Any) -> Any | None:
    """Group READ, or every partition gets GROUP_AUTHORIZATION_FAILED."""
    if ctx.authorized(Op.READ, Res.GROUP, req.group_id):
        return None
    return commit_error_response(ctx, "OffsetCommit", req, ErrorCode.group_authorization_failed)


API = ApiSpec(ApiKey.OFFSET_COMMIT, 2, 9, offset_commit, authorize=authorize_offset_commit)
