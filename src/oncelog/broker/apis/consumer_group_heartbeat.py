"""ConsumerGroupHeartbeat (API 68): a member of a consumer-protocol group (KIP-848) joins,
stays, reconciles its assignment or leaves, all through this one request."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, denied, group_read_rule
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import duration_ms
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def consumer_group_heartbeat(ctx: RequestContext, req: Any) -> Any:
    owned = req.topic_partitions
    reply = await ctx.broker.groups.consumer_heartbeat(
        gm.ConsumerHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=duration_ms(req.rebalance_timeout),
            subscribed_topic_names=(
                None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names)
            ),
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor,
            owned=(
                None
                if owned is None
                else tuple((t.topic_id, tuple(t.partitions)) for t in owned if t.topic_id)
            ),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.peer.rpartition(":")[0],
            api_version=ctx.version,
            # the group's own configs, if set (Kafka's GroupConfigManager)
            session_timeout_ms=ctx.broker.group_configs.session_timeout_ms(req.group_id),
            heartbeat_interval_ms=ctx.broker.group_configs.heartbeat_interval_ms(req.group_id),
        ),
        # KAFKA-18813: a regex matches only topics this member may describe.
        describable=lambda topic: ctx.authorized(Op.DESCRIBE, Res.TOPIC, topic, log_denied=False),
    )
    r = ctx.response
    assignment = None
    if reply.assignment is not None:
        assignment = make(
            r.Assignment,
            topic_partitions=tuple(
                make(r.TopicPartitions, topic_id=t, partitions=ps) for t, ps in reply.assignment
            ),
        )
    return make(
        r.ConsumerGroupHeartbeatResponse,
        error_code=reply.error,
        error_message=reply.error_message,
        member_id=reply.member_id,
        member_epoch=reply.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=reply.heartbeat_interval_ms),
        assignment=assignment,
    )


def authorize_consumer_group_heartbeat(ctx: RequestContext, req: Any) -> Any | None:
    """Group READ, then (as Kafka) DESCRIBE on every subscribed topic named: a member may
    not learn of topics it cannot see through its assignment."""
    refused = group_read_rule(ctx, req)
    if refused is not None:
        return refused
    for name in req.subscribed_topic_names or ():
        if not ctx.authorized(Op.DESCRIBE, Res.TOPIC, name):
            return denied(ctx, ErrorCode.topic_authorization_failed, member_epoch=0)
    return None


API = ApiSpec(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    0,
    1,
    consumer_group_heartbeat,
    authorize=authorize_consumer_group_heartbeat,
)
