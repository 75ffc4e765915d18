"""DescribeTopicPartitions (API 75, KIP-966): topics and their partitions, paginated.

Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache: topics are
served in name order from the cursor on, at most ``min(max.request.partition.size.limit,
ResponsePartitionLimit)`` partitions (at least 1) per response; a topic cut short, or
the first topic that did not fit at all, becomes the next cursor. Topic DESCRIBE is
required per topic: an empty topic list (all topics) silently leaves out the others,
a named topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED without its
id. A cursor outside the requested topics, or with a negative partition, fails the
whole request with INVALID_REQUEST on every requested topic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, authorized_operations
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import ZERO_UUID, sole_replica
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import INTERNAL_TOPICS, topic_name_error
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


class InvalidRequest(Exception):
    pass


@dataclass(frozen=True, slots=True)
class PageEntry:
    """One topic of a page: ``partitions`` is None for a topic that does not exist."""

    name: str
    partitions: range | None


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[PageEntry]
    next_cursor: tuple[str, int] | None


def plan_page(
    names: list[str],
    partition_count: Callable[[str], int | None],
    cursor: tuple[str, int] | None,
    limit: int,
) -> Page:
    """Which partitions of which topics (``names`` sorted, from the cursor on) fit in
    ``limit`` partitions, and where the next page starts (Kafka's KRaftMetadataCache)."""
    remaining = limit
    entries: list[PageEntry] = []
    for name in names:
        if remaining == 0:
            return Page(entries, (name, 0))
        count = partition_count(name)
        if count is None:
            entries.append(PageEntry(name, None))
            continue
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        upper = min(count, start + remaining)
        entries.append(PageEntry(name, range(start, upper)))
        if upper < count:
            return Page(entries, (name, upper))
        remaining -= max(upper - start, 0)
    return Page(entries, None)


def _selected(ctx: RequestContext, req: Any) -> tuple[list[str], bool, tuple[str, int] | None]:
    """(topic names from the cursor on, whether all topics were asked for, cursor)."""
    cursor = None if req.cursor is None else (req.cursor.topic_name, req.cursor.partition_index)
    after = "" if cursor is None else cursor[0]
    all_topics = not req.topics
    requested = ctx.broker.topics.topics if all_topics else (t.name for t in req.topics)
    names = sorted({name for name in requested if name >= after})
    if cursor is not None and not all_topics and cursor[0] not in names:
        raise InvalidRequest("the topic list should contain the cursor topic")
    if cursor is not None and cursor[1] < 0:
        raise InvalidRequest("the cursor partition must be valid")
    return names, all_topics, cursor


def describe_topic_partitions(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    try:
        names, all_topics, cursor = _selected(ctx, req)
    except InvalidRequest:
        return make(
            r.DescribeTopicPartitionsResponse,
            topics=tuple(
                make(
                    r.DescribeTopicPartitionsResponseTopic,
                    error_code=ErrorCode.invalid_request,
                    name=t.name,
                    topic_id=ZERO_UUID,
                    is_internal=False,
                    partitions=(),
                )
                for t in req.topics
            ),
            next_cursor=None,
        )
    authorized: list[str] = []
    denied: list[str] = []
    for name in names:
        (authorized if ctx.authorized(Op.DESCRIBE, Res.TOPIC, name) else denied).append(name)
    limit = max(
        min(broker.config.settings.max_request_partition_size_limit, req.response_partition_limit),
        1,
    )
    page = plan_page(authorized, broker.topics.partition_count, cursor, limit)
    node = broker.node_id
    topics = []
    for entry in page.entries:
        topic = broker.topics.get(entry.name)
        if topic is None or entry.partitions is None:
            if all_topics:  # deleted meanwhile: an all-topics listing skips it
                continue
            bad_name = topic_name_error(entry.name) is not None
            topics.append(
                make(
                    r.DescribeTopicPartitionsResponseTopic,
                    error_code=ErrorCode.invalid_topic_exception
                    if bad_name
                    else ErrorCode.unknown_topic_or_partition,
                    name=entry.name,
                    topic_id=ZERO_UUID,
                    is_internal=entry.name in INTERNAL_TOPICS,
                    partitions=(),
                )
            )
            continue
        topics.append(
            make(
                r.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.none,
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=tuple(
                    make(
                        r.DescribeTopicPartitionsResponsePartition,
                        partition_index=i,
                        eligible_leader_replicas=(),
                        last_known_elr=(),
                        **sole_replica(node),
                    )
                    for i in entry.partitions
                ),
                topic_authorized_operations=authorized_operations(ctx, Res.TOPIC, topic.name),
            )
        )
    if not all_topics:
        topics.extend(
            make(
                r.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.topic_authorization_failed,
                name=name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=(),
            )
            for name in denied
        )
    return make(
        r.DescribeTopicPartitionsResponse,
        topics=tuple(topics),
        next_cursor=None
        if page.next_cursor is None
        else make(r.Cursor, topic_name=page.next_cursor[0], partition_index=page.next_cursor[1]),
    )


API = ApiSpec(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0, describe_topic_partitions)
