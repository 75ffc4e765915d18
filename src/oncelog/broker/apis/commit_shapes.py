"""Request and response shapes shared by OffsetCommit and TxnOffsetCommit."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.request import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.messages import make


def commit_topics(req: Any) -> tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...]:
    return tuple(
        (
            t.name,
            tuple(
                gm.CommitPartition(
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
                for p in t.partitions
            ),
        )
        for t in req.topics
    )


def split_readable(
    ctx: RequestContext, topics: tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...]
) -> tuple[
    tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...],
    tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...],
]:
    """(topics the principal may READ, TOPIC_AUTHORIZATION_FAILED results for the rest)."""
    allowed = tuple(t for t in topics if ctx.authorized(Op.READ, Res.TOPIC, t[0]))
    denied = tuple(
        (name, tuple((p.partition, ErrorCode.topic_authorization_failed) for p in parts))
        for name, parts in topics
        if (name, parts) not in allowed
    )
    return allowed, denied


def commit_error_response(ctx: RequestContext, prefix: str, req: Any, code: ErrorCode) -> Any:
    """Every partition of the request failed with ``code`` (group/transactional id denied)."""
    reply = gm.CommitReply(
        tuple(
            (name, tuple((p.partition, code) for p in parts)) for name, parts in commit_topics(req)
        )
    )
    return commit_response(ctx.response, prefix, reply)


def commit_response(r: ModuleType, prefix: str, reply: gm.CommitReply) -> Any:
    """``prefix`` names the kio classes: "OffsetCommit" or "TxnOffsetCommit"."""
    topic_cls = getattr(r, f"{prefix}ResponseTopic")
    part_cls = getattr(r, f"{prefix}ResponsePartition")
    return make(
        getattr(r, f"{prefix}Response"),
        topics=tuple(
            make(
                topic_cls,
                name=t,
                partitions=tuple(make(part_cls, partition_index=p, error_code=e) for p, e in parts),
            )
            for t, parts in reply.topics
        ),
    )
