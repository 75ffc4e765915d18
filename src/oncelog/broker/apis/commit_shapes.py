"""Request and response shapes shared by OffsetCommit and TxnOffsetCommit."""

from __future__ import annotations

from types import ModuleType
from typing import Any

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
