"""DescribeGroups (API 15): state, protocol and members of classic groups."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import OPS_UNKNOWN
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_groups(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    described = ctx.broker.groups.describe_groups(req.groups, ctx.version)
    return make(
        r.DescribeGroupsResponse,
        groups=tuple(
            make(
                r.DescribedGroup,
                error_code=g.error,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=tuple(
                    make(
                        r.DescribedGroupMember,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in g.members
                ),
                authorized_operations=OPS_UNKNOWN,
            )
            for g in described
        ),
    )


API = ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, describe_groups)
