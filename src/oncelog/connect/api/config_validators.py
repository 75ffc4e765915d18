"""Validators of configuration values (Kafka's ``ConfigDef.Validator`` family), for
Connect's plugin API: the shared ones of :mod:`oncelog.config.validators`, failing with
Connect's :class:`~oncelog.connect.api.errors.ConfigException` when a plugin calls them
itself."""

from __future__ import annotations

from typing import Any

from oncelog.config import validators as shared
from oncelog.config.errors import ConfigException as SharedConfigException
from oncelog.config.validators import Validator
from oncelog.connect.api.errors import as_connect_error

__all__ = [
    "Range",
    "ValidList",
    "ValidString",
    "Validator",
    "non_empty_string",
    "non_null",
    "unique_list",
]


def _connect(check: Validator, name: str, value: Any) -> None:
    try:
        check(name, value)
    except SharedConfigException as exc:
        raise as_connect_error(exc) from exc


class Range(shared.Range):
    def __call__(self, name: str, value: Any) -> None:
        _connect(super().__call__, name, value)


class ValidString(shared.ValidString):
    def __call__(self, name: str, value: Any) -> None:
        _connect(super().__call__, name, value)


class ValidList(shared.ValidList):
    def __call__(self, name: str, value: Any) -> None:
        _connect(super().__call__, name, value)


def non_empty_string(name: str, value: Any) -> None:
    _connect(shared.non_empty_string, name, value)


def non_null(name: str, value: Any) -> None:
    _connect(shared.non_null, name, value)


def unique_list(name: str, value: Any) -> None:
    _connect(shared.unique_list, name, value)
