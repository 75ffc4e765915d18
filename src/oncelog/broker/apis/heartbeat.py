"""Heartbeat (API 12): a member stays in its group's current generation."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import group_read_rule
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def heartbeat(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    reply = await groups.heartbeat(
        gm.HeartbeatRequest(
            req.group_id,
            req.generation_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
        )
    )
    return make(ctx.response.HeartbeatResponse, error_code=reply.error)


API = ApiSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat, authorize=group_read_rule)
