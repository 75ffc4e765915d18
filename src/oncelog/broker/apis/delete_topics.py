"""DeleteTopics (API 20): delete non-internal topics, by name or (v6, KIP-516) by id.

The rules are Kafka's controller's (ControllerApis.deleteTopics): deletion disabled
fails every topic; a v6 entry must name a topic by exactly one of name and id
(INVALID_REQUEST otherwise), and a name or id given twice, or a name whose id was
also given, is INVALID_REQUEST; an unknown id is UNKNOWN_TOPIC_ID. Authorization needs
Cluster DELETE or Topic DELETE; a topic the caller may not even describe is reported
without revealing its name (for an id) or its existence (for a name). Kafka shuffles
the results to hide which entries failed how; they are returned here in the order
Kafka builds them (request errors first), which no client relies on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import ZERO_UUID
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError, drop_partitions
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

log = logging.getLogger(__name__)
DISABLED = "Topic deletion is disabled."


def _requested(req: Any) -> list[tuple[str | None, uuid.UUID]]:
    """(name, id) per entry, ZERO_UUID for no id; v1-v5 send names only."""
    names = getattr(req, "topic_names", None)
    if names is not None:
        return [(name, ZERO_UUID) for name in names]
    return [(t.name, t.topic_id or ZERO_UUID) for t in req.topics]


async def delete_topics(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    results: list[Any] = []

    def answer(name: str | None, topic_id: uuid.UUID, code: ErrorCode, msg: str | None) -> None:
        results.append(
            make(
                r.DeletableTopicResult,
                name=name,
                topic_id=topic_id,
                error_code=code,
                error_message=msg,
            )
        )

    requested = _requested(req)
    if not broker.config.settings.delete_topic_enable:
        code = ErrorCode.invalid_request if ctx.version < 3 else ErrorCode.topic_deletion_disabled
        for name, topic_id in requested:
            answer(name, topic_id, code, DISABLED)
        return make(r.DeleteTopicsResponse, responses=tuple(results))

    names: dict[str, None] = {}  # insertion-ordered sets
    duplicate_names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    duplicate_ids: dict[uuid.UUID, None] = {}

    def add_name(name: str) -> None:
        if name in duplicate_names or name in names:
            duplicate_names[name] = None
            names.pop(name, None)
        else:
            names[name] = None

    for name, topic_id in requested:
        if name is None:
            if topic_id == ZERO_UUID:
                answer(
                    None,
                    ZERO_UUID,
                    ErrorCode.invalid_request,
                    "Neither topic name nor id were specified.",
                )
            elif topic_id in duplicate_ids or topic_id in ids:
                duplicate_ids[topic_id] = None
                ids.pop(topic_id, None)
            else:
                ids[topic_id] = None
        elif topic_id == ZERO_UUID:
            add_name(name)
        else:
            answer(
                name,
                topic_id,
                ErrorCode.invalid_request,
                "You may not specify both topic name and topic id.",
            )
    for name in duplicate_names:
        answer(name, ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name.")
    for topic_id in duplicate_ids:
        answer(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.")

    any_topic = cluster_authorized(ctx, Op.DELETE, log_denied=False)

    def describable(name: str) -> bool:
        return any_topic or ctx.authorized(Op.DESCRIBE, Res.TOPIC, name, log_denied=False)

    def deletable(name: str) -> bool:
        return any_topic or ctx.authorized(Op.DELETE, Res.TOPIC, name)

    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        topic = broker.topics.by_id.get(topic_id)
        if topic is None:
            answer(None, topic_id, ErrorCode.unknown_topic_id, None)
        elif deletable(topic.name):
            to_delete[topic_id] = topic.name
        else:
            shown = topic.name if describable(topic.name) else None
            answer(shown, topic_id, ErrorCode.topic_authorization_failed, None)
    for name in names:
        topic = broker.topics.get(name)
        if not describable(name):
            answer(name, ZERO_UUID, ErrorCode.topic_authorization_failed, None)
        elif topic is None:
            answer(
                name,
                ZERO_UUID,
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        elif not deletable(name):
            answer(name, ZERO_UUID, ErrorCode.topic_authorization_failed, None)
        elif topic.topic_id in to_delete or topic.topic_id in duplicate_ids:
            # Named and also given by id: only said once the caller may delete it, so
            # that ids are never revealed to whoever may not.
            duplicate_ids[topic.topic_id] = None
            to_delete.pop(topic.topic_id, None)
            answer(
                name,
                topic.topic_id,
                ErrorCode.invalid_request,
                "The provided topic name maps to an ID that was already supplied.",
            )
        else:
            to_delete[topic.topic_id] = name

    for topic_id, name in to_delete.items():
        code, message = ErrorCode.none, None
        try:
            # gone from the registry at once; its files are removed off the event loop
            detached = broker.topics.detach(name, save=False)
        except TopicError as exc:
            code, message = exc.code, exc.message
        else:
            try:
                # metadata first: a crash now leaves orphans, removed on start
                await broker.topics.save_off_loop()
                await asyncio.to_thread(drop_partitions, detached)
            finally:
                broker.topics.dropped(name)  # the name may be created again
            log.info("deleted topic %s (%s)", name, topic_id)
        answer(name, topic_id, code, message)
    return make(r.DeleteTopicsResponse, responses=tuple(results))


API = ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, delete_topics)
