"""Validators of configuration values, Kafka's ``ConfigDef.Validator`` family: each is
called with (name, parsed value) and raises ``ConfigException`` when the value is
invalid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from oncelog.config.errors import ConfigException

Validator = Callable[[str, Any], None]
"""Called with (name, parsed value); raises ConfigException when the value is invalid."""


class Range:
    """Numeric bounds; Kafka's ``ConfigDef.Range``."""

    def __init__(self, min_: float | None, max_: float | None) -> None:
        self.min = min_
        self.max = max_

    @classmethod
    def at_least(cls, min_: float) -> Self:
        return cls(min_, None)

    @classmethod
    def between(cls, min_: float, max_: float) -> Self:
        return cls(min_, max_)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigException(name, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigException(name, value, f"Value must be no more than {self.max}")

    def __str__(self) -> str:
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


class ValidString:
    """One of a fixed set of strings; Kafka's ``ConfigDef.ValidString`` (and its
    case-insensitive variant)."""

    def __init__(self, *allowed: str, case_sensitive: bool = True) -> None:
        self.allowed = list(allowed)
        self.case_sensitive = case_sensitive

    def __call__(self, name: str, value: Any) -> None:
        if self.case_sensitive:
            if value not in self.allowed:
                raise ConfigException(
                    name, value, f"String must be one of: {', '.join(self.allowed)}"
                )
        elif value is None or value.lower() not in (a.lower() for a in self.allowed):
            raise ConfigException(
                name, value, f"String must be one of (case insensitive): {', '.join(self.allowed)}"
            )

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


class ValidList:
    """Every element of a LIST value is one of ``allowed``."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = list(allowed)

    def __call__(self, name: str, value: Any) -> None:
        for item in value or []:
            if item not in self.allowed:
                raise ConfigException(
                    name,
                    value,
                    f"Invalid value {item} for configuration {name}: String must be one of: {', '.join(self.allowed)}",
                )

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


def non_empty_string(name: str, value: Any) -> None:
    """Kafka's ``NonEmptyString``: null is allowed, the empty string is not."""
    if value is not None and not value.strip():
        raise ConfigException(name, value, "String must be non-empty")


def non_null(name: str, value: Any) -> None:
    if value is None:
        raise ConfigException(name, None, "Value must be non-null")


def unique_list(name: str, value: Any) -> None:
    seen: set[str] = set()
    for item in value or []:
        if item in seen:
            raise ConfigException(name, ",".join(value), f"Duplicate alias provided: {item}")
        seen.add(item)
