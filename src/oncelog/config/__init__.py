"""Settings, declared one way for all of oncelog: Kafka's ``ConfigDef`` (types, defaults,
validators, importance, documentation and Kafka's validation messages) and typed,
frozen settings objects built from it once at start-up.

This package imports no other oncelog package (an import-linter contract).
"""

from oncelog.config.config_def import (
    NO_DEFAULT_VALUE,
    AbstractConfig,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    Password,
    Width,
    convert_to_string,
    parse_type,
)
from oncelog.config.errors import ConfigException, MissingConfigException

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
    "convert_to_string",
    "parse_type",
]
