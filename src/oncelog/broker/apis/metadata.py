"""Metadata (API 3): topics, partitions and this one broker; auto-creates topics."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import (
    CLUSTER_NAME,
    Op,
    Res,
    authorized_operations,
    cluster_authorized,
)
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.topic_creation import create_topic
from oncelog.broker.apis.wire_values import OPS_UNKNOWN, ZERO_UUID, sole_replica
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import Topic, TopicError, topic_name_error
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import InvalidRequestError, make

log = logging.getLogger(__name__)


def _topic_entry(ctx: RequestContext, topic: Topic, with_operations: bool) -> Any:
    r = ctx.response
    node = ctx.broker.node_id
    parts = tuple(
        make(r.MetadataResponsePartition, partition_index=i, **sole_replica(node))
        for i in range(len(topic.partitions))
    )
    return make(
        r.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=parts,
        topic_authorized_operations=(
            authorized_operations(ctx, Res.TOPIC, topic.name) if with_operations else OPS_UNKNOWN
        ),
    )


def _error_entry(
    ctx: RequestContext, name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> Any:
    return make(
        ctx.response.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id or ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=OPS_UNKNOWN,
    )


async def metadata(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    registry = broker.topics
    requested = req.topics
    if ctx.version == 0 and requested == ():
        requested = None  # v0: an empty list means all topics
    # v0-v3 always auto-create; v4+ asks explicitly.
    allow_auto = (
        getattr(req, "allow_auto_topic_creation", True)
        and broker.config.settings.auto_create_topics_enable
    )
    # v8+: the bit fields are computed only when asked for (KIP-430), else Integer.MIN_VALUE.
    with_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    entries = []
    if requested is None:
        entries = [
            _topic_entry(ctx, t, with_ops)
            for t in registry.topics.values()
            if ctx.authorized(Op.DESCRIBE, Res.TOPIC, t.name, log_denied=False)
        ]
    else:
        if ctx.version < 12 and any(getattr(item, "name", "") is None for item in requested):
            # Kafka: topic ids in requests and null names start at v12; before that the
            # response cannot even carry a null name.
            raise InvalidRequestError(f"null topic name in a v{ctx.version} request")
        auto_created = False
        seen = set()
        for item in requested:
            name = getattr(item, "name", None)
            topic_id = getattr(item, "topic_id", None)
            if (name, topic_id) in seen:
                continue  # Kafka answers a set of topics: each once, however often asked
            seen.add((name, topic_id))
            if name is None:
                topic = registry.by_id.get(topic_id) if topic_id else None
                if topic is None:
                    entries.append(_error_entry(ctx, None, ErrorCode.unknown_topic_id, topic_id))
                elif not ctx.authorized(Op.DESCRIBE, Res.TOPIC, topic.name):
                    entries.append(
                        _error_entry(ctx, None, ErrorCode.topic_authorization_failed, topic_id)
                    )
                else:
                    entries.append(_topic_entry(ctx, topic, with_ops))
                continue
            topic = registry.get(name)
            if topic is None and topic_name_error(name) is not None:
                entries.append(_error_entry(ctx, name, ErrorCode.invalid_topic_exception))
                continue
            if not ctx.authorized(Op.DESCRIBE, Res.TOPIC, name) or (
                topic is None
                and allow_auto
                and not cluster_authorized(ctx, Op.CREATE, log_denied=False)
                and not ctx.authorized(Op.CREATE, Res.TOPIC, name)
            ):
                entries.append(_error_entry(ctx, name, ErrorCode.topic_authorization_failed))
                continue
            if topic is None and allow_auto:
                try:
                    # its logs open off the loop; metadata is written once, below
                    topic = await create_topic(
                        registry, name, broker.config.settings.num_partitions, {}, save=False
                    )
                    auto_created = True
                    log.info("auto-created topic %s", name)
                except TopicError as exc:
                    # another request is creating it right now: Kafka's retriable answer
                    code = (
                        ErrorCode.leader_not_available
                        if exc.code == ErrorCode.topic_already_exists
                        else exc.code
                    )
                    entries.append(_error_entry(ctx, name, code))
                    continue
            if topic is None:
                entries.append(_error_entry(ctx, name, ErrorCode.unknown_topic_or_partition))
            else:
                entries.append(_topic_entry(ctx, topic, with_ops))
        if auto_created:
            await registry.save_off_loop()  # once for the whole request
    host, port = ctx.advertised_address
    return make(
        r.MetadataResponse,
        brokers=(
            make(r.MetadataResponseBroker, node_id=broker.node_id, host=host, port=port, rack=None),
        ),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(entries),
        # only v8-v10 carry it; DescribeCluster replaced it from v11 on
        cluster_authorized_operations=(
            authorized_operations(ctx, Res.CLUSTER, CLUSTER_NAME)
            if getattr(req, "include_cluster_authorized_operations", False)
            else OPS_UNKNOWN
        ),
    )


API = ApiSpec(ApiKey.METADATA, 0, 12, metadata)
