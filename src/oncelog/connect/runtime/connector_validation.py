"""Validation of a connector configuration (Kafka's ``AbstractHerder.validateConnectorConfig``):
what ``PUT /connector-plugins/{p}/config/validate`` answers and what ``POST /connectors``
checks, with the keys of ``connector_config`` enriched by the transforms' and
predicates' own keys, KIP-618 exactly-once checks and the sink's topics."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from oncelog.connect.api.config import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    Importance,
    config_infos,
    parse_type,
)
from oncelog.connect.api.connector import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from oncelog.connect.api.errors import ConfigException, ConnectException
from oncelog.connect.runtime.client_configs import validate_overrides
from oncelog.connect.runtime.connector_config import (
    CONNECTOR_CLASS,
    DLQ_TOPIC,
    EXACTLY_ONCE_SUPPORT,
    PREDICATES,
    TOPICS,
    TOPICS_REGEX,
    TRANSACTION_BOUNDARY,
    TRANSFORMS,
    base_connector_config_def,
    sink_connector_config_def,
    source_connector_config_def,
)
from oncelog.connect.runtime.plugins import PluginRegistry

log = logging.getLogger(__name__)


def _prefixed(definition: ConfigDef, prefix: str, group: str) -> list[Any]:
    return [replace(key, name=prefix + key.name, group=group) for key in definition.keys()]


def enriched_config_def(
    base: ConfigDef, config: Mapping[str, str], plugins: PluginRegistry
) -> tuple[ConfigDef, dict[str, str]]:
    """``base`` plus the keys of each configured transformation and predicate, and the
    errors found resolving their classes (by key)."""
    errors: dict[str, str] = {}
    keys = list(base.keys())
    for kind, resolve, extra in (
        (PREDICATES, plugins.predicate_class, ()),
        (TRANSFORMS, plugins.transformation_class, ("negate", "predicate")),
    ):
        try:
            aliases = parse_type(kind, config.get(kind, ""), ConfigType.LIST)
        except ConfigException:
            continue
        for alias in dict.fromkeys(aliases):
            prefix = f"{kind}.{alias}."
            group = f"{'Transforms' if kind == TRANSFORMS else 'Predicates'}: {alias}"
            type_def = ConfigDef().define(
                "type", ConfigType.CLASS, importance=Importance.HIGH, group=group, order_in_group=-1,
                documentation=f"Class for the '{alias}' {'transformation' if kind == TRANSFORMS else 'predicate'}.",
            )  # fmt: skip
            if "negate" in extra:
                type_def.define("negate", ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
                                "Whether the configured predicate should be negated.", group=group)  # fmt: skip
                type_def.define("predicate", ConfigType.STRING, None, None, Importance.MEDIUM,
                                "The alias of a predicate used to determine whether to apply this transformation.",
                                group=group)  # fmt: skip
            keys.extend(_prefixed(type_def, prefix, group))
            class_name = config.get(prefix + "type")
            if not class_name:
                continue
            try:
                plugin_cls = resolve(class_name, prefix + "type")
            except ConfigException as exc:
                errors[prefix + "type"] = str(exc)
                continue
            own = plugin_cls().config_def()
            keys.extend(
                k for k in _prefixed(own, prefix, group) if k.name not in {x.name for x in keys}
            )
    return ConfigDef(keys), errors


def validate_connector_config(
    config: Mapping[str, str],
    plugins: PluginRegistry,
    override_policy: str = "All",
    exactly_once_source: str = "disabled",
) -> dict[str, Any]:
    """Kafka's ``ConfigInfos`` for a connector configuration; ``error_count`` 0 means valid.

    ``exactly_once_source`` is the validating worker's ``exactly.once.source.support``:
    source connectors get KIP-618's preflight checks against it.

    Raises :class:`ConfigException` naming ``connector.class`` when it is missing or
    unknown (Kafka answers 400 for those before validating anything else).
    """
    class_name = config.get(CONNECTOR_CLASS)
    if not class_name:
        raise ConfigException(f"Connector config {dict(config)} contains no connector type")
    connector_cls = plugins.connector_class(class_name)
    connector = connector_cls()
    is_source = issubclass(connector_cls, SourceConnector)
    base = (
        sink_connector_config_def()
        if issubclass(connector_cls, SinkConnector)
        else source_connector_config_def()
        if is_source
        else base_connector_config_def()
    )
    definition, class_errors = enriched_config_def(base, config, plugins)
    values = definition.validate(config)
    for key, message in class_errors.items():
        values[key].errors.append(message)
    _check_transform_references(config, values)
    if issubclass(connector_cls, SinkConnector):
        _check_sink_topics(config, values)
    if is_source:
        assert isinstance(connector, SourceConnector)
        check_exactly_once(connector, config, values, exactly_once_source.lower() == "enabled")
    own_def = connector.config_def()
    try:
        own_values = connector.validate(config)
    except ConnectException as exc:
        own_values = {CONNECTOR_CLASS: ConfigValue(CONNECTOR_CLASS, class_name, errors=[str(exc)])}
    for own_key in own_def.keys():
        if own_key.name not in definition:
            definition = definition.merge(ConfigDef([own_key]))
    for name, value in own_values.items():
        if name in values:
            values[name].errors.extend(e for e in value.errors if e not in values[name].errors)
        else:
            values[name] = value
    override_values = validate_overrides(override_policy, config)
    for name, value in override_values.items():
        if name not in definition:
            definition = definition.merge(
                ConfigDef().define(
                    name, ConfigType.STRING, None, None, Importance.LOW, "Client override."
                )
            )
        values[name] = value
    return config_infos(
        f"{connector_cls.__module__}.{connector_cls.__qualname__}", definition, values
    )


def _unexpected(exc: Exception) -> str:
    message = str(exc).strip()
    if message:
        return f"An unexpected error occurred during validation: {message}"
    return "An unexpected error occurred during validation; please see the worker logs for more details."


def check_exactly_once(
    connector: SourceConnector,
    config: Mapping[str, str],
    values: dict[str, ConfigValue],
    worker_enabled: bool,
) -> None:
    """KIP-618's preflight checks, each on its own key, only when that key is valid so far
    (Kafka's ``DistributedHerder.validateSourceConnectorConfig``)."""
    support = values[EXACTLY_ONCE_SUPPORT]
    if not support.errors and str(support.value).lower() == "required":
        if not worker_enabled:
            support.add_error("This worker does not have exactly-once source support enabled.")
        try:
            answer = connector.exactly_once_support(dict(config))
        except Exception as exc:
            log.error(
                "Failed while validating connector support for exactly-once semantics: %s", exc
            )
            support.add_error(_unexpected(exc))
        else:
            if answer is None:
                support.add_error(
                    "The connector does not implement the API required for preflight validation "
                    "of exactly-once source support. Please consult the documentation for the "
                    "connector to determine whether it supports exactly-once semantics, and then "
                    'consider reconfiguring the connector to use the value "requested" for this '
                    "property (which will disable this preflight check and allow the connector "
                    "to be created)."
                )
            elif answer is not ExactlyOnceSupport.SUPPORTED:
                support.add_error(
                    "The connector does not support exactly-once semantics with the provided "
                    "configuration."
                )
    boundary = values[TRANSACTION_BOUNDARY]
    if not boundary.errors and str(boundary.value).lower() == "connector":
        try:
            can_define = connector.can_define_transaction_boundaries(dict(config))
        except Exception as exc:
            log.error(
                "Failed while validating connector support for defining its own transaction "
                "boundaries: %s",
                exc,
            )
            boundary.add_error(_unexpected(exc))
        else:
            if can_define is None:
                boundary.add_error(
                    "This connector has returned a null value from its "
                    "canDefineTransactionBoundaries method, which is not permitted. The connector "
                    "will be treated as if it cannot define its own transaction boundaries, and "
                    f"cannot be configured with '{TRANSACTION_BOUNDARY}' set to 'connector'."
                )
            elif can_define is not ConnectorTransactionBoundaries.SUPPORTED:
                boundary.add_error(
                    "The connector does not support connector-defined transaction boundaries with "
                    "the given configuration. Please reconfigure it to use a different transaction "
                    "boundary definition."
                )


def _check_transform_references(config: Mapping[str, str], values: dict[str, ConfigValue]) -> None:
    try:
        predicates = set(parse_type(PREDICATES, config.get(PREDICATES, ""), ConfigType.LIST))
        transforms = parse_type(TRANSFORMS, config.get(TRANSFORMS, ""), ConfigType.LIST)
    except ConfigException:
        return
    for alias in transforms:
        key = f"{TRANSFORMS}.{alias}.predicate"
        predicate = config.get(key)
        if predicate and predicate not in predicates and key in values:
            values[key].errors.append(
                f"Invalid value {predicate} for configuration {key}: Predicate alias {predicate} is not defined in '{PREDICATES}'"
            )


def _check_sink_topics(config: Mapping[str, str], values: dict[str, ConfigValue]) -> None:
    topics = [t for t in parse_type(TOPICS, config.get(TOPICS, ""), ConfigType.LIST) if t]
    regex = config.get(TOPICS_REGEX, "")
    if topics and regex:
        message = "topics and topics.regex are mutually exclusive options, but both are set."
        values[TOPICS].errors.append(message)
        values[TOPICS_REGEX].errors.append(message)
    elif not topics and not regex:
        message = "Must configure one of topics or topics.regex"
        values[TOPICS].errors.append(message)
        values[TOPICS_REGEX].errors.append(message)
    dlq = config.get(DLQ_TOPIC, "").strip()
    if dlq and dlq in topics:
        values[DLQ_TOPIC].errors.append(
            f"The DLQ topic '{dlq}' may not be included in the list of topics ('{TOPICS}={config.get(TOPICS)}') to be consumed."
        )
    if dlq and regex and re.fullmatch(regex, dlq):
        values[DLQ_TOPIC].errors.append(
            f"The DLQ topic '{dlq}' may not be included in the regex matching the topics ('{TOPICS_REGEX}={regex}') to be consumed."
        )
