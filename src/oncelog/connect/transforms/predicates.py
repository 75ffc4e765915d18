"""The built-in predicates of KIP-585: ``TopicNameMatches``, ``HasHeaderKey`` and
``RecordIsTombstone``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import non_empty_string, non_null
from oncelog.connect.api.records import ConnectRecord
from oncelog.connect.api.transforms import Predicate
from oncelog.connect.transforms.routers import compile_regex


class TopicNameMatches(Predicate):
    """True for records whose topic name matches ``pattern`` in full."""

    PATTERN = "pattern"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            self.PATTERN,
            ConfigType.STRING,
            validator=lambda n, v: compile_regex(n, v) and None,
            importance=Importance.MEDIUM,
            documentation="A Java regular expression for matching against the name of a record's topic.",
        )

    def configure(self, configs: Mapping[str, Any]) -> None:
        pattern = self.config_def().parse(configs)[self.PATTERN]
        self.pattern = compile_regex(self.PATTERN, pattern)

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """True for records with at least one header named ``name``."""

    NAME = "name"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            self.NAME,
            ConfigType.STRING,
            validator=_non_empty,
            importance=Importance.MEDIUM,
            documentation="The header name.",
        )

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.name: str = self.config_def().parse(configs)[self.NAME]

    def test(self, record: ConnectRecord) -> bool:
        return record.headers.last_with_name(self.name) is not None


def _non_empty(name: str, value: Any) -> None:
    non_null(name, value)
    non_empty_string(name, value)


class RecordIsTombstone(Predicate):
    """True for records whose value is null."""

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
