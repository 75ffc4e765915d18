"""SyncGroup (API 14): the leader hands out assignments, members receive theirs."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import group_read_rule
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def sync_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    reply = await groups.sync(
        gm.SyncGroupRequest(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            assignments=tuple((a.member_id, a.assignment) for a in req.assignments),
        )
    )
    return make(
        ctx.response.SyncGroupResponse,
        error_code=reply.error,
        protocol_type=reply.protocol_type,
        protocol_name=reply.protocol_name,
        assignment=reply.assignment,
    )


API = ApiSpec(ApiKey.SYNC_GROUP, 0, 5, sync_group, authorize=group_read_rule)
