"""Typed configuration definitions for Connect's plugin API, Kafka's ``ConfigDef``.

The definitions are the shared ones of :mod:`oncelog.config`; what Connect adds is
that every configuration error leaving them is Connect's own
:class:`~oncelog.connect.api.errors.ConfigException` (so Connect's handlers and REST
answers see the errors they always did), and the REST validation response
(:func:`config_infos`, Kafka's ``ConfigInfos`` JSON shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncelog.config import config_def as shared
from oncelog.config.config_def import (
    NO_DEFAULT_VALUE,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    Password,
    Width,
    convert_to_string,
    value_string,
)
from oncelog.config.errors import ConfigException as SharedConfigException
from oncelog.connect.api.errors import ConfigException, MissingConfigException, as_connect_error

__all__ = [
    "NO_DEFAULT_VALUE",
    "AbstractConfig",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConfigType",
    "ConfigValue",
    "Importance",
    "MissingConfigException",
    "Password",
    "Width",
    "config_infos",
    "convert_to_string",
    "parse_type",
]


def parse_type(name: str, value: Any, type_: ConfigType) -> Any:
    """:func:`oncelog.config.parse_type`, failing with Connect's ConfigException."""
    try:
        return shared.parse_type(name, value, type_)
    except SharedConfigException as exc:
        raise as_connect_error(exc) from exc


class ConfigDef(shared.ConfigDef):
    """The shared :class:`~oncelog.config.ConfigDef`, failing with Connect's errors."""

    def _add(self, key: ConfigKey) -> None:
        try:
            super()._add(key)
        except SharedConfigException as exc:
            raise as_connect_error(exc) from exc

    def _parse_value(self, key: ConfigKey, raw: Any, present: bool) -> Any:
        try:
            return super()._parse_value(key, raw, present)
        except SharedConfigException as exc:
            raise as_connect_error(exc) from exc


class AbstractConfig(shared.AbstractConfig):
    """The shared :class:`~oncelog.config.AbstractConfig`, failing with Connect's errors."""

    def __init__(self, definition: shared.ConfigDef, originals: Mapping[str, Any]) -> None:
        try:
            super().__init__(definition, originals)
        except SharedConfigException as exc:
            raise as_connect_error(exc) from exc

    def get(self, name: str) -> Any:
        try:
            return super().get(name)
        except SharedConfigException as exc:
            raise as_connect_error(exc) from exc


def config_infos(
    name: str, definition: shared.ConfigDef, values: Mapping[str, ConfigValue]
) -> dict[str, Any]:
    """Kafka Connect's validation response (``ConfigInfos``): ``name``, ``error_count``,
    ``groups`` and one ``{"definition": …, "value": …}`` entry per key."""
    configs = []
    error_count = 0
    for key in definition.keys():
        value = values.get(key.name, ConfigValue(key.name))
        error_count += len(value.errors)
        configs.append(
            {
                "definition": {
                    "name": key.name,
                    "type": key.type.value,
                    "required": not key.has_default,
                    "default_value": convert_to_string(key.default, key.type)
                    if key.has_default
                    else None,
                    "importance": key.importance.value,
                    "documentation": key.documentation,
                    "group": key.group,
                    "width": key.width.value,
                    "display_name": key.display_name,
                    "dependents": list(key.dependents),
                    "order": key.order_in_group,
                },
                "value": {
                    "name": key.name,
                    "value": value_string(value.value, key.type),
                    "recommended_values": [str(v) for v in value.recommended_values],
                    "errors": list(value.errors),
                    "visible": value.visible,
                },
            }
        )
    return {
        "name": name,
        "error_count": error_count,
        "groups": definition.groups(),
        "configs": configs,
    }
