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


def _parse_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


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
        else:
            kwargs[f.name] = int(value) * f.metadata["unit"]  # type: ignore[call-overload]
    return cls(**kwargs)


def property_defaults(cls: type[Any]) -> dict[str, int | bool]:
    """``{broker property: default}`` in the property's own unit."""
    out: dict[str, int | bool] = {}
    for f in dataclasses.fields(cls):
        key = f.metadata.get("key")
        if key is not None:
            default = f.default
            out[key] = default if isinstance(default, bool) else default // f.metadata["unit"]
    return out
