"""DescribeGroups (API 15): state, protocol and members of classic groups."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, authorized_operations
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import OPS_UNKNOWN
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_groups(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    allowed = [g for g in req.groups if ctx.authorized(Op.DESCRIBE, Res.GROUP, g)]
    described = ctx.broker.groups.describe_groups(tuple(allowed), ctx.version)
    denied = [g for g in req.groups if g not in allowed]
    with_ops = bool(getattr(req, "include_authorized_operations", False))  # v3+
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
                authorized_operations=(
                    authorized_operations(ctx, Res.GROUP, g.group_id) if with_ops else OPS_UNKNOWN
                ),
            )
            for g in described
        )
        + tuple(
            make(
                r.DescribedGroup,
                error_code=ErrorCode.group_authorization_failed,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=OPS_UNKNOWN,
            )
            for g in denied
        ),
    )


API = ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, describe_groups)
