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


def split_committable(
    ctx: RequestContext, topics: tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...]
) -> tuple[
    tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...],
    tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...],
]:
    """(what may be committed, the refused partitions with their errors), as Kafka's
    ``KafkaApis.handleOffsetCommitRequest`` and ``handleTxnOffsetCommitRequest`` split a
    request before the coordinator sees it: a topic the principal may not READ gets
    TOPIC_AUTHORIZATION_FAILED, a topic or partition that does not exist gets
    UNKNOWN_TOPIC_OR_PARTITION (its offsets are never stored)."""
    registry = ctx.broker.topics
    allowed: list[tuple[str, tuple[gm.CommitPartition, ...]]] = []
    refused: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    for name, parts in topics:
        if not ctx.authorized(Op.READ, Res.TOPIC, name):
            refused.append((name, tuple((p.partition, _DENIED) for p in parts)))
            continue
        count = registry.partition_count(name) or 0
        valid = tuple(p for p in parts if 0 <= p.partition < count)
        unknown = tuple((p.partition, _UNKNOWN) for p in parts if not 0 <= p.partition < count)
        if valid:
            allowed.append((name, valid))
        if unknown:
            refused.append((name, unknown))
    return tuple(allowed), tuple(refused)


_DENIED = ErrorCode.topic_authorization_failed
_UNKNOWN = ErrorCode.unknown_topic_or_partition


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
