"""ConsumerGroupDescribe (API 69): epochs, assignor and members' current and target
assignments of consumer-protocol groups (KIP-848)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import OPS_UNKNOWN
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

# ConsumerGroupDescribe v1's member_type (KIP-1099): the protocol the member speaks.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


def consumer_group_describe(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    allowed = [g for g in req.group_ids if ctx.authorized(Op.DESCRIBE, Res.GROUP, g)]
    described = {g.group_id: g for g in ctx.broker.groups.consumer_group_describe(allowed)}
    groups = []
    for gid in req.group_ids:
        g = described.get(gid) or gm.DescribedConsumerGroup(
            ErrorCode.group_authorization_failed, gid
        )
        if g.error is ErrorCode.none and not _topics_describable(ctx, g):
            # KAFKA-18813: a group whose members hold a topic the client may not
            # describe (a regex subscription resolves to every matching topic) is
            # answered TOPIC_AUTHORIZATION_FAILED, without its members.
            g = gm.DescribedConsumerGroup(
                ErrorCode.topic_authorization_failed,
                gid,
                error_message="The group has described topic(s) that the client is not "
                "authorized to describe.",
            )
        groups.append(_group(r, g))
    return make(r.ConsumerGroupDescribeResponse, groups=tuple(groups))


def _topics_describable(ctx: RequestContext, g: gm.DescribedConsumerGroup) -> bool:
    names = {
        t.topic_name
        for m in g.members
        for t in (*m.assignment, *m.target_assignment)
        if t.topic_name
    }
    return all(ctx.authorized(Op.DESCRIBE, Res.TOPIC, n, log_denied=False) for n in names)


def _group(r: Any, g: gm.DescribedConsumerGroup) -> Any:
    return make(
        r.DescribedGroup,
        error_code=g.error,
        error_message=g.error_message,
        group_id=g.group_id,
        group_state=g.state if g.error is ErrorCode.none else "",
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor_name,
        members=tuple(
            make(
                r.Member,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(r, m.assignment),
                target_assignment=_assignment(r, m.target_assignment),
                member_type=MEMBER_TYPE_CLASSIC if m.classic else MEMBER_TYPE_CONSUMER,
            )
            for m in g.members
        ),
        authorized_operations=OPS_UNKNOWN,
    )


def _assignment(r: Any, parts: tuple[gm.DescribedTopicPartitions, ...]) -> Any:
    return make(
        r.Assignment,
        topic_partitions=tuple(
            make(
                r.TopicPartitions,
                topic_id=t.topic_id,
                topic_name=t.topic_name,
                partitions=t.partitions,
            )
            for t in parts
        ),
    )


API = ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, consumer_group_describe)
