"""OffsetFetch (API 9): a group's committed offsets; require_stable waits out
pending transactional commits (KIP-447)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


async def _fetch_one(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> gm.OffsetFetchReply:
    if not ctx.authorized(Op.DESCRIBE, Res.GROUP, group_id):
        return gm.OffsetFetchReply(group_id, ErrorCode.group_authorization_failed)
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    reply = await ctx.broker.groups.fetch_offsets(
        gm.OffsetFetchRequest(group_id, wanted, require_stable, member[0], member[1])
    )
    return _authorized_topics(ctx, reply, listed_all=topics is None)


def _authorized_topics(
    ctx: RequestContext, reply: gm.OffsetFetchReply, *, listed_all: bool
) -> gm.OffsetFetchReply:
    """Topic DESCRIBE: all-topics listings drop unauthorized topics; named ones get
    TOPIC_AUTHORIZATION_FAILED per partition (Kafka's OffsetFetch)."""
    if not ctx.broker.authorizer.enabled:
        return reply
    topics = []
    for name, parts in reply.topics:
        if ctx.authorized(Op.DESCRIBE, Res.TOPIC, name, log_denied=not listed_all):
            topics.append((name, parts))
        elif not listed_all:
            denied = ErrorCode.topic_authorization_failed
            topics.append(
                (name, tuple(gm.FetchedPartition(p.partition, -1, -1, "", denied) for p in parts))
            )
    return gm.OffsetFetchReply(reply.group_id, reply.error, tuple(topics))


def _topics(reply: gm.OffsetFetchReply, topic_cls: type, partition_cls: type) -> tuple[Any, ...]:
    """The per-topic results; v8+ and older versions name the classes differently."""
    return tuple(
        make(
            topic_cls,
            name=t,
            partitions=tuple(
                make(
                    partition_cls,
                    partition_index=p.partition,
                    committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch,
                    metadata=p.metadata,
                    error_code=p.error,
                )
                for p in parts
            ),
        )
        for t, parts in reply.topics
    )


async def offset_fetch(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if hasattr(req, "groups"):  # v8+: several groups
        out = []
        for g in req.groups:
            # v9+: a consumer-protocol member names itself and its epoch (KIP-848).
            member = (getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            reply = await _fetch_one(ctx, g.group_id, g.topics, req.require_stable, member)
            out.append(
                make(
                    r.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    error_code=reply.error,
                    topics=_topics(
                        reply, r.OffsetFetchResponseTopics, r.OffsetFetchResponsePartitions
                    ),
                )
            )
        return make(r.OffsetFetchResponse, groups=tuple(out))
    reply = await _fetch_one(ctx, req.group_id, req.topics, getattr(req, "require_stable", False))
    if ctx.version < 2 and reply.error != ErrorCode.none and req.topics is not None:
        # v0-v1 have no group-level error: Kafka puts it on every requested partition
        # (KAFKA-19246), so e.g. COORDINATOR_LOAD_IN_PROGRESS is not read as "no offset".
        reply = gm.OffsetFetchReply(
            reply.group_id,
            reply.error,
            tuple(
                (
                    t.name,
                    tuple(
                        gm.FetchedPartition(p, -1, -1, "", reply.error) for p in t.partition_indexes
                    ),
                )
                for t in req.topics
            ),
        )
    return make(
        r.OffsetFetchResponse,
        error_code=reply.error,
        topics=_topics(reply, r.OffsetFetchResponseTopic, r.OffsetFetchResponsePartition),
    )


# v10 switches to topic ids and is not advertised.
API = ApiSpec(ApiKey.OFFSET_FETCH, 1, 9, offset_fetch)
