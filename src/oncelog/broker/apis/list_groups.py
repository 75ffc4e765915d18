"""ListGroups (API 16): groups filtered by state and type."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def list_groups(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    reply = ctx.broker.groups.list_groups(
        getattr(req, "states_filter", ()), getattr(req, "types_filter", ())
    )
    # Cluster DESCRIBE lists every group; otherwise only those the caller may describe.
    everything = cluster_authorized(ctx, Op.DESCRIBE, log_denied=False)
    return make(
        r.ListGroupsResponse,
        error_code=reply.error,
        groups=tuple(
            make(
                r.ListedGroup,
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in reply.groups
            if everything or ctx.authorized(Op.DESCRIBE, Res.GROUP, g.group_id, log_denied=False)
        ),
    )


API = ApiSpec(ApiKey.LIST_GROUPS, 0, 5, list_groups)
