"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (topic configs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.server import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import BROKER_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make
from oncelog.storage.config import TOPIC_CONFIG_DEFAULTS

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"})


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


def _broker_entries(broker: Broker) -> list[ConfigEntry]:
    cfg = broker.config
    return [
        ConfigEntry(k, str(v).lower() if isinstance(v, bool) else str(v), SOURCE_STATIC_BROKER if k in cfg.explicit else SOURCE_DEFAULT, True)
        for k, v in sorted(cfg.values.items())
    ]


def describe_configs(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    results = []
    for res in req.resources:
        code, message, entries = ErrorCode.none, None, []
        if res.resource_type == RESOURCE_TOPIC:
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                code, message = ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist"
            else:
                entries = config_entries(broker, topic.configs)
        elif res.resource_type == RESOURCE_BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                code, message = ErrorCode.invalid_request, f"Unexpected broker id, expected {broker.node_id} but received {res.resource_name}"
            else:
                entries = _broker_entries(broker)
        else:
            code, message = ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
        keys = res.configuration_keys
        if keys is not None:
            entries = [e for e in entries if e.name in keys]
        results.append(
            make(
                r.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=tuple(
                    make(
                        r.DescribeConfigsResourceResult,
                        name=e.name,
                        value=e.value,
                        read_only=e.read_only,
                        config_source=e.source,
                        is_default=e.source == SOURCE_DEFAULT,
                        is_sensitive=False,
                        synonyms=(),
                        documentation=None,
                    )
                    for e in entries
                ),
            )
        )
    return make(r.DescribeConfigsResponse, results=tuple(results))


def _alter_result(r: Any, res: Any, code: ErrorCode, message: str | None) -> Any:
    return make(r.AlterConfigsResourceResponse, error_code=code, error_message=message, resource_type=res.resource_type, resource_name=res.resource_name)


def _apply(ctx: RequestContext, req: Any, compute: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    results = []
    for res in req.resources:
        code, message = ErrorCode.none, None
        try:
            if res.resource_type == RESOURCE_BROKER:
                raise TopicError(ErrorCode.invalid_request, "Dynamic broker configs are not supported; restart with --set")
            if res.resource_type != RESOURCE_TOPIC:
                raise TopicError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}")
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                raise TopicError(ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist")
            broker.topics.set_configs(res.resource_name, compute(topic.configs, res.configs), validate_only=req.validate_only)
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append(_alter_result(r, res, code, message))
    return make(r.AlterConfigsResponse if hasattr(r, "AlterConfigsResponse") else r.IncrementalAlterConfigsResponse, responses=tuple(results))


def alter_configs(ctx: RequestContext, req: Any) -> Any:
    def replace(_: dict[str, str], configs: Any) -> dict[str, str]:
        out = {}
        for c in configs:
            if c.value is None:
                raise TopicError(ErrorCode.invalid_request, f"Null value not supported for : {c.name}")
            out[c.name] = c.value
        return out

    return _apply(ctx, req, replace)


def incremental_alter_configs(ctx: RequestContext, req: Any) -> Any:
    def patch(current: dict[str, str], configs: Any) -> dict[str, str]:
        out = dict(current)
        seen = set()
        for c in configs:
            if c.name in seen:
                raise TopicError(ErrorCode.invalid_request, f"Error due to duplicate config keys: {c.name}")
            seen.add(c.name)
            op = c.config_operation
            if op == OP_SET:
                if c.value is None:
                    raise TopicError(ErrorCode.invalid_request, f"Null value not supported for : {c.name}")
                out[c.name] = c.value
            elif op == OP_DELETE:
                out.pop(c.name, None)
            elif op in (OP_APPEND, OP_SUBTRACT):
                if c.name not in LIST_CONFIGS:
                    raise TopicError(ErrorCode.invalid_config, f"Config value append is not allowed for config key: {c.name}")
                base = out.get(c.name, TOPIC_CONFIG_DEFAULTS.get(c.name) or "")
                items = [x for x in base.split(",") if x]
                values = [x for x in (c.value or "").split(",") if x]
                if op == OP_APPEND:
                    items += [v for v in values if v not in items]
                else:
                    items = [x for x in items if x not in values]
                out[c.name] = ",".join(items)
            else:
                raise TopicError(ErrorCode.invalid_request, f"Unknown config operation {op}")
        return out

    return _apply(ctx, req, patch)


def register(broker: Broker) -> None:
    v = BROKER_API_VERSIONS
    broker.register(ApiKey.DESCRIBE_CONFIGS, v[ApiKey.DESCRIBE_CONFIGS], describe_configs)
    broker.register(ApiKey.ALTER_CONFIGS, v[ApiKey.ALTER_CONFIGS], alter_configs)
    broker.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, v[ApiKey.INCREMENTAL_ALTER_CONFIGS], incremental_alter_configs)
