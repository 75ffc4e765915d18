"""DeleteGroups (API 42): delete empty groups and their offsets."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.clock import now_ms
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    reply: gm.DeleteGroupsReply = await groups.call(
        groups.coordinator.delete_groups(req.groups_names, now_ms())
    )
    return make(
        r.DeleteGroupsResponse,
        results=tuple(
            make(r.DeletableGroupResult, group_id=g, error_code=e) for g, e in reply.results
        ),
    )


API = ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, delete_groups)
