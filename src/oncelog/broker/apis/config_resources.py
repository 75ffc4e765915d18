"""Config resources shared by DescribeConfigs, the two AlterConfigs and CreateTopics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.messages import make
from oncelog.storage.config import TOPIC_CONFIG_DEFAULTS

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# new topic configs from (current overrides, the request's config entries)
ConfigChange = Callable[[dict[str, str], Any], dict[str, str]]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False


def config_entries(broker: Broker, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Effective topic configs: overrides, then broker-derived values, then Kafka defaults."""
    derived = broker.topics.topic_defaults
    out = []
    for name in sorted(set(TOPIC_CONFIG_DEFAULTS) | set(overrides)):
        if name in overrides:
            out.append(ConfigEntry(name, overrides[name], SOURCE_DYNAMIC_TOPIC))
        elif name in derived and derived[name] != TOPIC_CONFIG_DEFAULTS.get(name):
            out.append(ConfigEntry(name, derived[name], SOURCE_STATIC_BROKER))
        else:
            out.append(ConfigEntry(name, TOPIC_CONFIG_DEFAULTS.get(name), SOURCE_DEFAULT))
    return out


def _alter_result(r: Any, res: Any, code: ErrorCode, message: str | None) -> Any:
    return make(
        r.AlterConfigsResourceResponse,
        error_code=code,
        error_message=message,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
    )


async def apply_topic_config_change(ctx: RequestContext, req: Any, compute: ConfigChange) -> Any:
    """AlterConfigs and IncrementalAlterConfigs: topic resources only, one result each."""
    broker = ctx.broker
    r = ctx.response
    results = []
    changed = False
    for res in req.resources:
        code, message = ErrorCode.none, None
        try:
            if res.resource_type == RESOURCE_TOPIC and not ctx.authorized(
                Op.ALTER_CONFIGS, Res.TOPIC, res.resource_name
            ):
                raise TopicError(ErrorCode.topic_authorization_failed, "Topic ALTER_CONFIGS denied")
            if res.resource_type == RESOURCE_BROKER:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "Dynamic broker configs are not supported; restart with --set",
                )
            if res.resource_type != RESOURCE_TOPIC:
                raise TopicError(
                    ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
                )
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {res.resource_name} does not exist",
                )
            broker.topics.set_configs(
                res.resource_name,
                compute(topic.configs, res.configs),
                validate_only=req.validate_only,
                save=False,
            )
            changed = changed or not req.validate_only
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append(_alter_result(r, res, code, message))
    if changed:  # once for the whole request, its fsyncs off the loop
        await broker.topics.save_off_loop()
    return make(
        r.AlterConfigsResponse
        if hasattr(r, "AlterConfigsResponse")
        else r.IncrementalAlterConfigsResponse,
        responses=tuple(results),
    )
