"""Typed configuration definitions, Kafka's ``org.apache.kafka.common.config.ConfigDef``.

The one way oncelog declares a setting, whoever reads it (the broker, topic configs,
the coordinators, Connect, the Spark options). A :class:`ConfigDef` declares keys with
a type, a default, an optional validator, an importance and documentation. ``parse``
turns string maps (as they come from properties files and REST bodies) into typed
values and fails on the first bad key; ``validate`` collects every problem per key.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

from oncelog.config.errors import ConfigException, MissingConfigException
from oncelog.config.validators import Validator


class ConfigType(enum.Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT_VALUE"


NO_DEFAULT_VALUE: Any = _NoDefault()
"""Marks a required key (Kafka's ``ConfigDef.NO_DEFAULT_VALUE``)."""


class Password:
    """A secret value; its ``str`` never shows the secret (Kafka's ``Password``)."""

    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self._value = value

    def value(self) -> str:
        return self._value

    def __str__(self) -> str:
        return self.HIDDEN

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1, "a 16-bit integer"),
    ConfigType.INT: (-(2**31), 2**31 - 1, "a 32-bit integer"),
    ConfigType.LONG: (-(2**63), 2**63 - 1, "a 64-bit integer"),
}


def parse_type(
    name: str,
    value: Any,
    type_: ConfigType,
    *,
    not_a_number: Mapping[ConfigType, str] | None = None,
) -> Any:
    """Convert ``value`` (usually a string) to ``type_``; None stays None.

    Raises :class:`ConfigException` with Kafka's wording when it cannot; ``not_a_number``
    replaces the wording for a number that does not parse, per type (Kafka: "Not a
    number of type INT").
    """
    if value is None:
        return None
    if (
        isinstance(value, str)
        and type_ is not ConfigType.STRING
        and type_ is not ConfigType.PASSWORD
    ):
        value = value.strip()
    if type_ is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            if value.lower() == "true":
                return True
            if value.lower() == "false":
                return False
            raise ConfigException(name, value, "Expected value to be either true or false")
        raise ConfigException(
            name,
            value,
            f"Expected value to be either true or false, but it was a {type(value).__name__}",
        )
    if type_ is ConfigType.STRING:
        if isinstance(value, str):
            return value
        raise ConfigException(
            name, value, f"Expected value to be a string, but it was a {type(value).__name__}"
        )
    if type_ is ConfigType.PASSWORD:
        if isinstance(value, Password):
            return value
        if isinstance(value, str):
            return Password(value)
        raise ConfigException(
            name, value, "Expected value to be a string, but it was a " + type(value).__name__
        )
    if type_ in _INT_RANGES:
        low, high, what = _INT_RANGES[type_]
        if isinstance(value, bool):
            raise ConfigException(name, value, f"Expected value to be {what}, but it was a bool")
        if isinstance(value, int):
            parsed = value
        elif isinstance(value, str):
            if not re.fullmatch(r"[+-]?\d+", value):
                raise ConfigException(name, value, _not_a_number(type_, not_a_number))
            parsed = int(value)
        else:
            raise ConfigException(
                name, value, f"Expected value to be {what}, but it was a {type(value).__name__}"
            )
        if not low <= parsed <= high:
            raise ConfigException(name, value, _not_a_number(type_, not_a_number))
        return parsed
    if type_ is ConfigType.DOUBLE:
        if isinstance(value, bool):
            raise ConfigException(name, value, "Expected value to be a double, but it was a bool")
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise ConfigException(name, value, _not_a_number(type_, not_a_number)) from None
        raise ConfigException(
            name, value, f"Expected value to be a double, but it was a {type(value).__name__}"
        )
    if type_ is ConfigType.LIST:
        if isinstance(value, list | tuple):
            return [str(v) for v in value]
        if isinstance(value, str):
            return [] if not value else [part.strip() for part in value.split(",")]
        raise ConfigException(
            name, value, f"Expected a comma separated list, but it was a {type(value).__name__}"
        )
    if type_ is ConfigType.CLASS:
        # Classes are resolved by the plugin registry; here a class is its name.
        if isinstance(value, str):
            return value
        if isinstance(value, type):
            return f"{value.__module__}.{value.__qualname__}"
        raise ConfigException(
            name, value, "Expected a class name, but it was a " + type(value).__name__
        )
    raise AssertionError(type_)


def _not_a_number(type_: ConfigType, wording: Mapping[ConfigType, str] | None) -> str:
    return (wording or {}).get(type_, f"Not a number of type {type_.value}")


def convert_to_string(value: Any, type_: ConfigType) -> str | None:
    """Render a parsed value as Kafka's ``ConfigDef.convertToString`` does."""
    if value is None:
        return None
    if type_ is ConfigType.LIST:
        return ",".join(value)
    if type_ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ is ConfigType.PASSWORD:
        return Password.HIDDEN
    if type_ is ConfigType.DOUBLE:
        return repr(float(value))
    return str(value)


# --- definitions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    importance: Importance
    documentation: str
    validator: Validator | None = None
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str = ""
    dependents: tuple[str, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT_VALUE


@dataclass
class ConfigValue:
    """The result of validating one key: Kafka's ``ConfigValue``."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def add_error(self, message: str) -> None:
        self.errors.append(message)


class ConfigDef:
    """An ordered set of :class:`ConfigKey` definitions.

    ``not_a_number`` rewords the error for a number that does not parse, per type (see
    :func:`parse_type`); the broker keeps its own long-standing wording with it.
    """

    def __init__(
        self,
        keys: Iterable[ConfigKey] = (),
        *,
        not_a_number: Mapping[ConfigType, str] | None = None,
    ) -> None:
        self._keys: dict[str, ConfigKey] = {}
        self.not_a_number = dict(not_a_number or {})
        for key in keys:
            self._add(key)

    def _add(self, key: ConfigKey) -> None:
        if key.name in self._keys:
            raise ConfigException(f"Configuration {key.name} is defined twice.")
        if key.has_default and key.default is not None:
            # Defaults are checked at definition time, as Kafka does.
            parsed = parse_type(key.name, key.default, key.type)
            if key.validator is not None:
                key.validator(key.name, parsed)
            key = _replace_default(key, parsed)
        self._keys[key.name] = key

    def define(
        self,
        name: str,
        type_: ConfigType,
        default: Any = NO_DEFAULT_VALUE,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        documentation: str = "",
        *,
        group: str | None = None,
        order_in_group: int = -1,
        width: Width = Width.NONE,
        display_name: str = "",
        dependents: Sequence[str] = (),
    ) -> Self:
        """Add a key; returns ``self`` so definitions can be chained."""
        self._add(
            ConfigKey(
                name,
                type_,
                default,
                importance,
                documentation,
                validator,
                group,
                order_in_group,
                width,
                display_name or name,
                tuple(dependents),
            )
        )
        return self

    def merge(self, other: ConfigDef) -> Self:
        """A new definition with this one's keys then ``other``'s. A key both declare with
        the same type and default (one setting that two typed configs read) is kept once;
        any other clash raises."""
        merged = type(self)(self._keys.values(), not_a_number=self.not_a_number)
        for key in other.keys():
            mine = merged._keys.get(key.name)
            if mine is None or (mine.type, mine.default) != (key.type, key.default):
                merged._add(key)
        return merged

    def keys(self) -> list[ConfigKey]:
        return list(self._keys.values())

    def names(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def groups(self) -> list[str]:
        seen: list[str] = []
        for key in self._keys.values():
            if key.group is not None and key.group not in seen:
                seen.append(key.group)
        return seen

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key; the first invalid or missing key raises."""
        values: dict[str, Any] = {}
        for key in self._keys.values():
            values[key.name] = self._parse_value(key, props.get(key.name), key.name in props)
        return values

    def _parse_value(self, key: ConfigKey, raw: Any, present: bool) -> Any:
        if present:
            value = parse_type(key.name, raw, key.type, not_a_number=self.not_a_number)
        elif key.has_default:
            value = key.default
        else:
            raise MissingConfigException(key.name)
        # An optional key left unset (None) is not validated: validators check real values.
        if key.validator is not None and not (
            value is None and key.has_default and key.default is None
        ):
            key.validator(key.name, value)
        return value

    def parse_one(self, name: str, raw: Any) -> Any:
        """``raw`` given for the defined key ``name``, typed and validated."""
        return self._parse_value(self._keys[name], raw, True)

    def validate(self, props: Mapping[str, Any]) -> dict[str, ConfigValue]:
        """A :class:`ConfigValue` per defined key, each with all of its errors."""
        result: dict[str, ConfigValue] = {}
        for key in self._keys.values():
            config_value = ConfigValue(key.name)
            try:
                config_value.value = self._parse_value(key, props.get(key.name), key.name in props)
            except ConfigException as exc:
                config_value.value = props.get(key.name)
                config_value.add_error(str(exc))
            result[key.name] = config_value
        return result


def _replace_default(key: ConfigKey, default: Any) -> ConfigKey:
    return replace(key, default=default)


class AbstractConfig:
    """Parsed values of a :class:`ConfigDef` plus the original strings (Kafka's
    ``AbstractConfig``), with typed getters and prefix views."""

    def __init__(self, definition: ConfigDef, originals: Mapping[str, Any]) -> None:
        self.definition = definition
        self.originals: dict[str, Any] = dict(originals)
        self.values = definition.parse(self.originals)

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigException(f"Unknown configuration '{name}'")
        return self.values[name]

    def get_int(self, name: str) -> int:
        return int(self.get(name))

    def get_str(self, name: str) -> str | None:
        value = self.get(name)
        return None if value is None else str(value)

    def get_bool(self, name: str) -> bool:
        return bool(self.get(name))

    def get_list(self, name: str) -> list[str]:
        return list(self.get(name) or [])

    def get_password(self, name: str) -> str | None:
        value = self.get(name)
        return None if value is None else value.value()

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, Any]:
        return {
            (k[len(prefix) :] if strip else k): v
            for k, v in self.originals.items()
            if k.startswith(prefix)
        }


def value_string(value: Any, type_: ConfigType) -> str | None:
    """A given or parsed value as text: strings as given, the rest as Kafka prints them."""
    if value is None:
        return None
    if isinstance(value, str) and type_ is not ConfigType.PASSWORD:
        return value
    try:
        return convert_to_string(value, type_)
    except (TypeError, ValueError):
        return str(value)
