"""CreateTopics (API 19): new topics with one replica on this broker."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized
from oncelog.broker.apis.config_resources import config_entries
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.topic_creation import OFF_LOOP_PARTITIONS, create_topic
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

log = logging.getLogger(__name__)


def _check_replication(rf: int) -> None:
    """Raises for a replication factor a single broker cannot give. (Raised here, not
    returned to be raised: a local holding the error would make a cycle with its
    traceback's frame, which holds the whole request until a full collection.)"""
    if rf == -1 or rf == 1:
        return
    if rf <= 0:
        raise TopicError(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    raise TopicError(
        ErrorCode.invalid_replication_factor,
        f"Unable to replicate the partition {rf} time(s): The target replication factor of "
        f"{rf} cannot be reached because only 1 broker(s) are registered.",
    )


def _denied_topic(r: Any, name: str) -> Any:
    return make(
        r.CreatableTopicResult,
        name=name,
        error_code=ErrorCode.topic_authorization_failed,
        error_message="Topic CREATE denied",
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


async def create_topics(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    counts = Counter(t.name for t in req.topics)
    may_create_any = cluster_authorized(ctx, Op.CREATE, log_denied=False)
    results = []
    for t in req.topics:
        if not may_create_any and not ctx.authorized(Op.CREATE, Res.TOPIC, t.name):
            results.append(_denied_topic(r, t.name))
            continue
        topic = None
        try:
            if counts[t.name] > 1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    f"Create topics request from client `{ctx.header.client_id}` contains "
                    f"multiple entries for the following topics: {t.name}",
                )
            assignments = t.assignments or ()
            num = t.num_partitions
            if assignments:
                if num != -1 or t.replication_factor != -1:
                    raise TopicError(
                        ErrorCode.invalid_request,
                        "Both numPartitions or replicationFactor and replicasAssignments were "
                        "set. Both cannot be used at the same time.",
                    )
                num = len(assignments)
                if any(tuple(a.broker_ids) != (broker.node_id,) for a in assignments):
                    raise TopicError(
                        ErrorCode.invalid_replica_assignment,
                        f"Replica assignments must name only broker {broker.node_id}",
                    )
            else:
                _check_replication(t.replication_factor)
            if num == -1:
                num = broker.config.settings.num_partitions
            configs: dict[str, str] = {}
            for c in t.configs:
                if c.value is None:
                    raise TopicError(
                        ErrorCode.invalid_config,
                        f"Null value not supported for topic configs: {c.name}",
                    )
                configs[c.name] = c.value
            topic = await create_topic(
                broker.topics,
                t.name,
                num,
                configs,
                validate_only=req.validate_only,
                off_loop_above=OFF_LOOP_PARTITIONS,
            )
            if topic:
                log.info("created topic %s with %d partitions", t.name, num)
            # The resulting configs only for who may describe them (Kafka's KafkaApis:
            # TOPIC_AUTHORIZATION_FAILED in topic_config_error_code otherwise).
            extra: dict[str, Any] = {}
            result_configs: tuple[Any, ...] | None = None
            if not hasattr(r, "CreatableTopicConfigs"):  # before v5
                pass
            elif ctx.authorized(Op.DESCRIBE_CONFIGS, Res.TOPIC, t.name, log_denied=False):
                result_configs = tuple(
                    make(
                        r.CreatableTopicConfigs,
                        name=e.name,
                        value=e.value,
                        read_only=e.read_only,
                        config_source=e.source,
                        is_sensitive=False,
                    )
                    for e in config_entries(broker, configs)
                )
            else:
                result_configs = ()
                extra["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            results.append(
                make(
                    r.CreatableTopicResult,
                    name=t.name,
                    topic_id=topic.topic_id if topic else None,
                    error_code=ErrorCode.none,
                    error_message=None,
                    num_partitions=num,
                    replication_factor=1,
                    configs=result_configs,
                    **extra,
                )
            )
        except TopicError as exc:
            results.append(
                make(
                    r.CreatableTopicResult,
                    name=t.name,
                    topic_id=None,
                    error_code=exc.code,
                    error_message=exc.message,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
    return make(r.CreateTopicsResponse, topics=tuple(results))


API = ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, create_topics)
