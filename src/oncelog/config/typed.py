"""Typed settings: a frozen dataclass whose fields declare their :class:`ConfigKey`.

Each field made with :func:`setting` names its property (Kafka's name), type, default,
validator, importance and documentation; :func:`definition` collects them into a
:class:`ConfigDef` (what parses, validates and documents the properties) and
:func:`build` makes the typed object from parsed properties, once, at start-up. The
field default is the only place a default is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from oncelog.config.config_def import ConfigDef, ConfigKey, ConfigType, Importance, parse_type
from oncelog.config.validators import Validator

T = TypeVar("T")
C = TypeVar("C")

_INT_MAX = 2**31 - 1
_KEY = "oncelog.config.key"
_UNIT = "oncelog.config.unit"


def _infer_type(default: object) -> ConfigType:
    if isinstance(default, bool):
        return ConfigType.BOOLEAN
    if isinstance(default, int):
        return ConfigType.INT if -_INT_MAX - 1 <= default <= _INT_MAX else ConfigType.LONG
    if isinstance(default, float):
        return ConfigType.DOUBLE
    return ConfigType.STRING


def setting(
    name: str,
    default: T,
    doc: str = "",
    *,
    type: ConfigType | None = None,  # noqa: A002 - ConfigDef's own word
    validator: Validator | None = None,
    importance: Importance = Importance.MEDIUM,
    unit: int = 1,
    group: str | None = None,
) -> T:
    """A field read from property ``name``. ``type`` defaults from the default's Python
    type (INT, or LONG past 32 bits; DOUBLE; BOOLEAN; STRING). ``unit`` scales a
    property given in a coarser unit (``offsets.retention.minutes``) to the field's:
    the property's default is the field's divided by it."""
    config_type = type or _infer_type(default)
    shown = default // unit if isinstance(default, int) and unit != 1 else default
    key = ConfigKey(name, config_type, shown, importance, doc, validator, group, display_name=name)
    metadata = {_KEY: key, _UNIT: unit}
    return dataclasses.field(default=default, metadata=metadata)  # type: ignore[no-any-return]


def keys(cls: type[Any]) -> list[ConfigKey]:
    """The :class:`ConfigKey` of every declared field of ``cls``, in field order."""
    return [f.metadata[_KEY] for f in dataclasses.fields(cls) if _KEY in f.metadata]


def definition(
    *classes: type[Any], not_a_number: Mapping[ConfigType, str] | None = None
) -> ConfigDef:
    """One :class:`ConfigDef` of the settings ``classes`` declare (a property two of them
    read, with the same type and default, once)."""
    out = ConfigDef(not_a_number=not_a_number)
    for cls in classes:
        out = out.merge(ConfigDef(keys(cls)))
    return out


def build(cls: type[C], values: Mapping[str, object]) -> C:
    """``cls`` from properties by name: parsed values, or text (parsed and validated
    here); a missing or None property keeps the field's default."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key: ConfigKey | None = f.metadata.get(_KEY)
        if key is None or values.get(key.name) is None:
            continue
        value = values[key.name]
        if isinstance(value, str) and key.type is not ConfigType.STRING:
            value = parse_type(key.name, value, key.type)
            if key.validator is not None:
                key.validator(key.name, value)
        if key.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            value = int(value) * f.metadata[_UNIT]  # type: ignore[call-overload]
        elif key.type is ConfigType.DOUBLE:
            value = float(value)  # type: ignore[arg-type]
        kwargs[f.name] = value
    return cls(**kwargs)


def property_defaults(cls: type[Any]) -> dict[str, object]:
    """``{property: default}`` in the property's own unit."""
    return {key.name: key.default for key in keys(cls)}


def field_names(cls: type[Any]) -> dict[str, str]:
    """``{property: field name}`` of every declared field of ``cls``."""
    return {f.metadata[_KEY].name: f.name for f in dataclasses.fields(cls) if _KEY in f.metadata}
