"""DeleteGroups (API 42): delete empty groups and their offsets."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    reply = await groups.delete_groups(req.groups_names)
    return make(
        r.DeleteGroupsResponse,
        results=tuple(
            make(r.DeletableGroupResult, group_id=g, error_code=e) for g, e in reply.results
        ),
    )


API = ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, delete_groups)
