"""Config resources shared by DescribeConfigs, the two AlterConfigs and CreateTopics."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized
from oncelog.broker.dynamic_config import LIST_CONFIGS, DynamicConfigError
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.group import group_configs
from oncelog.protocol.messages import make
from oncelog.storage.config import TOPIC_CONFIG_DEFAULTS

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8

# A resource's new configs from (its current ones, the request's config entries, its
# LIST-typed config names with their defaults: what APPEND/SUBTRACT start from).
ConfigChange = Callable[[dict[str, str], Any, Mapping[str, str]], dict[str, str]]

TOPIC_LISTS = {
    name: TOPIC_CONFIG_DEFAULTS.get(name) or ""
    for name in (
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    )
}
BROKER_LISTS = {name: "delete" for name in LIST_CONFIGS}  # log.cleanup.policy's default


class Refused(Exception):
    """A resource's change refused with ``code`` (and Kafka's message, if it has one)."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool = False
    # (name, value, source) of each definition, highest precedence first (include_synonyms)
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


def config_entries(broker: Broker, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Effective topic configs: overrides, then broker-derived values, then Kafka defaults."""
    derived = broker.topics.topic_defaults
    out = []
    for name in sorted(set(TOPIC_CONFIG_DEFAULTS) | set(overrides)):
        dynamic = broker.dynamic.topic_default_source(name)
        if name in overrides:
            out.append(ConfigEntry(name, overrides[name], SOURCE_DYNAMIC_TOPIC))
        elif dynamic is not None:  # follows a dynamic broker config (Kafka's synonyms)
            out.append(ConfigEntry(name, derived[name], dynamic))
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


async def apply_config_change(ctx: RequestContext, req: Any, compute: ConfigChange) -> Any:
    """AlterConfigs and IncrementalAlterConfigs: one result per resource."""
    broker = ctx.broker
    r = ctx.response
    results = []
    changed = False
    for res in req.resources:
        code, message = ErrorCode.none, None
        try:
            if res.resource_type == RESOURCE_TOPIC:
                changed = _alter_topic(ctx, req, res, compute) or changed
            elif res.resource_type == RESOURCE_BROKER:
                await _alter_broker(ctx, req, res, compute)
            elif res.resource_type == RESOURCE_GROUP:
                await _alter_group(ctx, req, res, compute)
            else:
                raise Refused(
                    ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
                )
        except TopicError as exc:
            code, message = exc.code, exc.message
        except Refused as exc:
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


def _alter_topic(ctx: RequestContext, req: Any, res: Any, compute: ConfigChange) -> bool:
    """A topic's overrides; whether the registry changed (to be saved)."""
    broker = ctx.broker
    if not ctx.authorized(Op.ALTER_CONFIGS, Res.TOPIC, res.resource_name):
        raise TopicError(ErrorCode.topic_authorization_failed, "Topic ALTER_CONFIGS denied")
    topic = broker.topics.get(res.resource_name)
    if topic is None:
        raise TopicError(
            ErrorCode.unknown_topic_or_partition,
            f"Topic {res.resource_name} does not exist",
        )
    broker.topics.set_configs(
        res.resource_name,
        compute(topic.configs, res.configs, TOPIC_LISTS),
        validate_only=req.validate_only,
        save=False,
    )
    return not req.validate_only


async def _alter_broker(ctx: RequestContext, req: Any, res: Any, compute: ConfigChange) -> None:
    """A dynamic broker config layer: per broker (the broker's id) or the cluster-wide
    default (""), as Kafka's ConfigAdminManager.preprocess and DynamicBrokerConfig."""
    broker = ctx.broker
    # Kafka's AuthHelper: broker configs need ALTER_CONFIGS on the cluster
    if not cluster_authorized(ctx, Op.ALTER_CONFIGS):
        raise Refused(ErrorCode.cluster_authorization_failed, None)
    per_broker = res.resource_name != ""
    if per_broker:
        check_node_id(broker.node_id, res.resource_name)
    props = compute(dict(broker.dynamic.layer(per_broker)), res.configs, BROKER_LISTS)
    try:
        await broker.alter_dynamic(per_broker, props, validate_only=req.validate_only)
    except DynamicConfigError as exc:
        # Kafka answers INVALID_REQUEST for any refused broker config change
        raise Refused(ErrorCode.invalid_request, str(exc)) from exc


async def _alter_group(ctx: RequestContext, req: Any, res: Any, compute: ConfigChange) -> None:
    """A group's configs (Kafka 4.0: ControllerConfigurationValidator and
    GroupConfigManager.validate), kept in meta/group_configs.json."""
    broker = ctx.broker
    if not ctx.authorized(Op.ALTER_CONFIGS, Res.GROUP, res.resource_name):
        raise Refused(ErrorCode.group_authorization_failed, None)
    if not res.resource_name:
        raise Refused(ErrorCode.invalid_request, "Default group resources are not allowed.")
    props = compute(broker.group_configs.of(res.resource_name), res.configs, {})
    try:
        group_configs.validate(props, broker.group_configs.cfg)
    except group_configs.GroupConfigError as exc:
        raise Refused(ErrorCode.invalid_config, str(exc)) from exc
    if req.validate_only:
        return
    broker.group_configs.set(res.resource_name, props)
    await broker.save_group_configs()


def group_entries(broker: Broker, group_id: str) -> list[ConfigEntry]:
    """Kafka's ConfigHelper.createGroupConfigEntry: GROUP_CONFIG if the group sets it."""
    own = broker.group_configs.of(group_id)
    return [
        ConfigEntry(name, str(value), SOURCE_GROUP if name in own else SOURCE_DEFAULT)
        for name, value in sorted(broker.group_configs.effective(group_id).items())
    ]


def check_node_id(node_id: int, name: str) -> None:
    """Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId."""
    try:
        given = int(name)
    except ValueError:
        raise Refused(
            ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}"
        ) from None
    if given != node_id:
        raise Refused(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id}, but received {name}",
        )
