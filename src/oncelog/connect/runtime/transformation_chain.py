"""The transformation chain of a connector, built from Kafka Connect's keys:

``transforms`` (aliases, in order), ``transforms.<alias>.type``,
``transforms.<alias>.predicate``, ``transforms.<alias>.negate`` and the
transformation's own keys under ``transforms.<alias>.``; ``predicates``,
``predicates.<alias>.type`` and their keys under ``predicates.<alias>.``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from oncelog.connect.api.config import ConfigType, parse_type
from oncelog.connect.api.errors import ConfigException, MissingConfigException
from oncelog.connect.api.transforms import Predicate, R, Transformation

TRANSFORMS = "transforms"
PREDICATES = "predicates"


class PluginResolver(Protocol):
    def transformation_class(self, name: str, config_key: str) -> type[Transformation]: ...

    def predicate_class(self, name: str, config_key: str) -> type[Predicate]: ...


@dataclass
class Stage:
    alias: str
    transformation: Transformation
    predicate: Predicate | None = None
    negate: bool = False

    def applies_to(self, record: Any) -> bool:
        return self.predicate is None or self.predicate.test(record) != self.negate


class TransformationChain:
    """Applies the stages in order; a stage returning None drops the record."""

    def __init__(self, stages: list[Stage]) -> None:
        self.stages = stages

    def apply(self, record: R) -> R | None:
        current: R | None = record
        for stage in self.stages:
            if current is None:
                return None
            if stage.applies_to(current):
                current = stage.transformation.apply(current)
        return current

    def close(self) -> None:
        closed: set[int] = set()
        for stage in self.stages:
            stage.transformation.close()
            if stage.predicate is not None and id(stage.predicate) not in closed:
                closed.add(id(stage.predicate))
                stage.predicate.close()


def _aliases(config: Mapping[str, str], key: str) -> list[str]:
    aliases: list[str] = parse_type(key, config.get(key, ""), ConfigType.LIST)
    seen: set[str] = set()
    for alias in aliases:
        if not alias:
            raise ConfigException(key, config.get(key), "Empty alias provided")
        if alias in seen:
            raise ConfigException(key, config.get(key), "Duplicate alias provided.")
        seen.add(alias)
    return aliases


def _sub_config(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def _required(config: Mapping[str, str], key: str) -> str:
    value = config.get(key)
    if not value:
        raise MissingConfigException(key)
    return value


def build_chain(config: Mapping[str, str], plugins: PluginResolver) -> TransformationChain:
    """Instantiate and configure the chain; raises :class:`ConfigException` naming the key."""
    predicates: dict[str, Predicate] = {}
    for alias in _aliases(config, PREDICATES):
        prefix = f"{PREDICATES}.{alias}."
        predicate_cls = plugins.predicate_class(_required(config, prefix + "type"), prefix + "type")
        instance = predicate_cls()
        try:
            instance.configure(_sub_config(config, prefix))
        except ConfigException as exc:
            raise exc.with_prefix(prefix) from None
        predicates[alias] = instance
    stages = []
    for alias in _aliases(config, TRANSFORMS):
        prefix = f"{TRANSFORMS}.{alias}."
        transform_cls = plugins.transformation_class(
            _required(config, prefix + "type"), prefix + "type"
        )
        transformation = transform_cls()
        settings = _sub_config(config, prefix)
        try:
            transformation.configure(settings)
        except ConfigException as exc:
            raise exc.with_prefix(prefix) from None
        predicate: Predicate | None = None
        predicate_alias = settings.get("predicate")
        if predicate_alias:
            if predicate_alias not in predicates:
                raise ConfigException(
                    prefix + "predicate",
                    predicate_alias,
                    f"Predicate alias {predicate_alias} is not defined in '{PREDICATES}'",
                )
            predicate = predicates[predicate_alias]
        negate = parse_type(prefix + "negate", settings.get("negate", "false"), ConfigType.BOOLEAN)
        if negate and predicate is None:
            raise ConfigException(prefix + "negate", "true", "negate requires a predicate")
        stages.append(Stage(alias, transformation, predicate, negate))
    return TransformationChain(stages)
