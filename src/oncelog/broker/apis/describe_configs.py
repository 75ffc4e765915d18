"""DescribeConfigs (API 32): effective topic, broker and group configs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res, cluster_authorized
from oncelog.broker.apis.config_resources import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    SOURCE_DEFAULT,
    ConfigEntry,
    config_entries,
    group_entries,
)
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.config import BROKER_CONFIG_DEF
from oncelog.broker.dynamic_config import SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER
from oncelog.broker.request import RequestContext
from oncelog.config.config_def import ConfigDef, ConfigKey, ConfigType
from oncelog.group.group_configs import GROUP_CONFIG_DEF
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.storage.config import TOPIC_CONFIG_DEF

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


def _broker_entries(broker: Broker, per_broker: bool) -> list[ConfigEntry]:
    """Kafka's ConfigHelper: the broker's id gives every config with its source (dynamic
    per-broker, dynamic default, static, default); the cluster default ("") only the
    dynamic defaults. A config is read-only unless it may be set at run time."""
    dynamic = broker.dynamic
    if not per_broker:
        return [
            ConfigEntry(
                k,
                v,
                SOURCE_DYNAMIC_DEFAULT_BROKER,
                False,
                tuple(x for x in dynamic.synonyms(k) if x[2] != SOURCE_DYNAMIC_BROKER),
            )
            for k, v in sorted(dynamic.default.items())
        ]
    return [
        ConfigEntry(
            k,
            str(v).lower() if isinstance(v, bool) else str(v),
            dynamic.source(k),
            not dynamic.may_alter(k),
            tuple(dynamic.synonyms(k)),
        )
        for k, v in sorted(broker.config.values.items())
    ]


# DescribeConfigsResponse.ConfigType's wire ids (0: UNKNOWN).
_TYPE_IDS = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.CLASS: 8,
    ConfigType.PASSWORD: 9,
}
_PASSWORD = 9
_DEFINITIONS = {
    RESOURCE_TOPIC: TOPIC_CONFIG_DEF,
    RESOURCE_BROKER: BROKER_CONFIG_DEF,
    RESOURCE_GROUP: GROUP_CONFIG_DEF,
}
_LISTENER_PREFIX = "listener.name."


def declared(definition: ConfigDef | None, name: str) -> ConfigKey | None:
    """The definition of ``name``, a per-listener override's being its base setting's
    (Kafka's KafkaConfig.configType)."""
    if definition is None:
        return None
    if name.startswith(_LISTENER_PREFIX):
        name = name[len(_LISTENER_PREFIX) :].partition(".")[2]
    return definition[name] if name in definition else None


def config_type(key: ConfigKey | None, name: str) -> int:
    """The type DescribeConfigs reports; secrets are PASSWORD, as Kafka types them."""
    if is_sensitive(name):
        return _PASSWORD
    return 0 if key is None else _TYPE_IDS[key.type]


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD-typed configs: never sent to clients (JAAS text holds passwords)."""
    return name.endswith(("password", "sasl.jaas.config", "ssl.keystore.key"))


def describe_configs(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    results = []
    # A resource asked for again gets the same answer, built once: a request repeating
    # one resource thousands of times costs the encoding only.
    answered: dict[tuple[int, str, tuple[str, ...] | None], Any] = {}
    for res in req.resources:
        key = (res.resource_type, res.resource_name, res.configuration_keys)
        if key in answered:
            results.append(answered[key])
            continue
        code, message, entries = ErrorCode.none, None, []
        if res.resource_type == RESOURCE_TOPIC and not ctx.authorized(
            Op.DESCRIBE_CONFIGS, Res.TOPIC, res.resource_name
        ):
            code, message = ErrorCode.topic_authorization_failed, None
        elif res.resource_type == RESOURCE_BROKER and not cluster_authorized(
            ctx, Op.DESCRIBE_CONFIGS
        ):
            code, message = ErrorCode.cluster_authorization_failed, None
        elif res.resource_type == RESOURCE_GROUP and not ctx.authorized(
            Op.DESCRIBE_CONFIGS, Res.GROUP, res.resource_name
        ):
            code, message = ErrorCode.group_authorization_failed, None
        elif res.resource_type == RESOURCE_GROUP:
            if not res.resource_name:
                code, message = ErrorCode.invalid_request, "Group name must not be empty"
            else:
                entries = group_entries(broker, res.resource_name)
        elif res.resource_type == RESOURCE_TOPIC:
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"Topic {res.resource_name} does not exist",
                )
            else:
                entries = config_entries(broker, topic.configs)
        elif res.resource_type == RESOURCE_BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                code, message = (
                    ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {broker.node_id} "
                    f"but received {res.resource_name}",
                )
            else:
                entries = _broker_entries(broker, res.resource_name != "")
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"Unsupported resource type {res.resource_type}",
            )
        keys = res.configuration_keys
        if keys is not None:
            entries = [e for e in entries if e.name in keys]
        answered[key] = make(
            r.DescribeConfigsResult,
            error_code=code,
            error_message=message,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=tuple(
                make(
                    r.DescribeConfigsResourceResult,
                    name=e.name,
                    value=None if is_sensitive(e.name) else e.value,
                    read_only=e.read_only,
                    config_source=e.source,
                    is_default=e.source == SOURCE_DEFAULT,
                    is_sensitive=is_sensitive(e.name),
                    synonyms=tuple(
                        make(
                            r.DescribeConfigsSynonym,
                            name=name,
                            value=None if is_sensitive(name) else value,
                            source=source,
                        )
                        for name, value, source in e.synonyms
                    )
                    if req.include_synonyms
                    else (),
                    config_type=config_type(key, e.name),
                    documentation=key.documentation
                    if key is not None and getattr(req, "include_documentation", False)
                    else None,
                )
                for e in entries
                for key in (declared(_DEFINITIONS.get(res.resource_type), e.name),)
            ),
        )
        results.append(answered[key])
    return make(r.DescribeConfigsResponse, results=tuple(results))


API = ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, describe_configs)
