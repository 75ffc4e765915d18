"""Typed settings declared once: each dataclass field names its Kafka broker property.

The field default is the only place a default is written; the broker's config schema
takes these properties (and their defaults) from the dataclasses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")
C = TypeVar("C")


def setting(key: str, default: T, *, unit_ms: int = 1) -> T:
    """A field read from broker property ``key``; ``unit_ms`` scales a property given in a
    coarser unit (``offsets.retention.minutes``) to the field's milliseconds."""
    metadata = {"key": key, "unit": unit_ms}
    return dataclasses.field(default=default, metadata=metadata)  # type: ignore[no-any-return]


def parse_bool(text: str) -> bool:
    """A boolean broker property: ``true`` or ``false`` in any case, as Kafka's ConfigDef
    takes a BOOLEAN (``1``, ``yes`` and the like are errors there, so here too)."""
    s = text.strip().lower()
    if s == "true":
        return True
    if s == "false":
        return False
    raise ValueError("Expected value to be either true or false")


def _parse_bool(value: object) -> bool:
    return parse_bool(value) if isinstance(value, str) else bool(value)


def from_properties(cls: type[C], values: Mapping[str, object]) -> C:
    """Build ``cls`` from broker settings (Kafka names); missing keys keep the defaults."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = f.metadata.get("key")
        if key is None or values.get(key) is None:
            continue
        value = values[key]
        if isinstance(f.default, bool):
            kwargs[f.name] = _parse_bool(value)
        elif isinstance(f.default, str):  # a list setting, kept as Kafka writes it
            kwargs[f.name] = str(value)
        else:
            kwargs[f.name] = int(value) * f.metadata["unit"]  # type: ignore[call-overload]
    return cls(**kwargs)


def property_defaults(cls: type[Any]) -> dict[str, int | bool | str]:
    """``{broker property: default}`` in the property's own unit."""
    out: dict[str, int | bool | str] = {}
    for f in dataclasses.fields(cls):
        key = f.metadata.get("key")
        if key is not None:
            default: int | bool | str = f.default  # type: ignore[assignment]
            scaled = isinstance(default, int) and not isinstance(default, bool)
            out[key] = default // f.metadata["unit"] if scaled else default
    return out
