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


class OneOf:
    """The value's text (or, with ``many``, each comma-separated item of it) is one of
    ``allowed``: Kafka's ``ValidString`` / ``ValidList`` for the broker's settings, kept
    as text, with ``ValidString``'s message."""

    def __init__(self, *allowed: str, many: bool = False, ignore_case: bool = False) -> None:
        self.allowed = list(allowed)
        self.many = many
        self.ignore_case = ignore_case

    def __call__(self, name: str, value: Any) -> None:
        items = [x.strip() for x in str(value).split(",")] if self.many else [str(value)]
        fold: Callable[[str], str] = str.lower if self.ignore_case else str
        known = {fold(a) for a in self.allowed}
        if any(fold(x) not in known for x in items):
            raise ConfigException(name, value, f"String must be one of: {', '.join(self.allowed)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


class Includes:
    """A comma-separated value lists ``required`` among its items."""

    def __init__(self, required: str) -> None:
        self.required = required

    def __call__(self, name: str, value: Any) -> None:
        if self.required not in {x.strip() for x in str(value).split(",")}:
            raise ConfigException(name, value, f"'{self.required}' must be included")

    def __str__(self) -> str:
        return f"[includes {self.required}]"


class Between:
    """Numeric bounds, both given, with the broker's message for a closed interval."""

    def __init__(self, low: float, high: float) -> None:
        self.low = low
        self.high = high

    def __call__(self, name: str, value: Any) -> None:
        if not self.low <= value <= self.high:
            raise ConfigException(
                name, value, f"Value must be no less than {self.low} and no more than {self.high}"
            )

    def __str__(self) -> str:
        return f"[{self.low},...,{self.high}]"


class AllOf:
    """Every one of ``validators``, in order; the first failure is the error."""

    def __init__(self, *validators: Validator) -> None:
        self.validators = validators

    def __call__(self, name: str, value: Any) -> None:
        for validator in self.validators:
            validator(name, value)

    def __str__(self) -> str:
        return ", ".join(str(v) for v in self.validators)
