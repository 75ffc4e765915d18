"""LeaveGroup (API 13): members leave a group; v3+ batches members (KIP-345)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import group_read_rule
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def leave_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    if hasattr(req, "members"):
        members = tuple(
            gm.LeaveMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
            for m in req.members
        )
    else:
        members = (gm.LeaveMember(req.member_id),)
    reply = await groups.leave(gm.LeaveGroupRequest(req.group_id, members))
    if not hasattr(r, "MemberResponse"):  # v0-v2: one error
        error = (
            reply.error
            if reply.error != ErrorCode.none or not reply.members
            else reply.members[0].error
        )
        return make(r.LeaveGroupResponse, error_code=error)
    return make(
        r.LeaveGroupResponse,
        error_code=reply.error,
        members=tuple(
            make(
                r.MemberResponse,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=m.error,
            )
            for m in reply.members
        ),
    )


API = ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, leave_group, authorize=group_read_rule)
