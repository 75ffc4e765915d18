"""JoinGroup (API 11): a member joins a classic group and waits for the rebalance."""

from __future__ import annotations

from typing import Any

from oncelog.broker.apis.acl_checks import group_read_rule
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import duration_ms
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def join_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    session = duration_ms(req.session_timeout)
    rebalance = duration_ms(req.rebalance_timeout) if hasattr(req, "rebalance_timeout") else -1
    reply = await groups.join(
        gm.JoinGroupRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=getattr(req, "group_instance_id", None),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.peer.rpartition(":")[0],
            api_version=ctx.version,
            reason=getattr(req, "reason", None),
        )
    )
    r = ctx.response
    protocol_name = reply.protocol_name
    if protocol_name is None and ctx.version < 7:
        protocol_name = ""
    return make(
        r.JoinGroupResponse,
        error_code=reply.error,
        generation_id=reply.generation_id,
        protocol_type=reply.protocol_type,
        protocol_name=protocol_name,
        leader=reply.leader,
        skip_assignment=reply.skip_assignment,
        member_id=reply.member_id,
        members=tuple(
            make(
                r.JoinGroupResponseMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata,
            )
            for m in reply.members
        ),
    )


API = ApiSpec(ApiKey.JOIN_GROUP, 0, 9, join_group, authorize=group_read_rule)
