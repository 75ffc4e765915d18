"""DeleteGroups (API 42): delete empty groups and their offsets."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    allowed = tuple(g for g in req.groups_names if ctx.authorized(Op.DELETE, Res.GROUP, g))
    reply = await groups.delete_groups(allowed)
    results = list(reply.results) + [
        (g, ErrorCode.group_authorization_failed) for g in req.groups_names if g not in allowed
    ]
    return make(
        r.DeleteGroupsResponse,
        results=tuple(make(r.DeletableGroupResult, group_id=g, error_code=e) for g, e in results),
    )


API = ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, delete_groups)
