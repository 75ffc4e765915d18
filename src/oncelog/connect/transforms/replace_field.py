"""``ReplaceField``: keep, drop or rename fields, Kafka's
``org.apache.kafka.connect.transforms.ReplaceField`` (configs ``exclude``, ``include``,
``renames``; the older ``blacklist`` / ``whitelist`` names are accepted too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigException, ConfigType, Importance
from oncelog.connect.api.data import Struct, struct_schema
from oncelog.connect.api.transforms import (
    KeyOrValue,
    R,
    require_map,
    require_struct,
    require_struct_schema,
)

PURPOSE = "field replacement"


def _parse_renames(name: str, mappings: list[str]) -> dict[str, str]:
    renames: dict[str, str] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ConfigException(name, ",".join(mappings), f"Invalid rename mapping: {mapping}")
        renames[parts[0]] = parts[1]
    return renames


class ReplaceField(KeyOrValue):
    EXCLUDE = "exclude"
    INCLUDE = "include"
    RENAMES = "renames"

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(self.EXCLUDE, ConfigType.LIST, [], None, Importance.MEDIUM, "Fields to exclude. This takes precedence over the fields to include.")
            .define(self.INCLUDE, ConfigType.LIST, [], None, Importance.MEDIUM, "Fields to include. If specified, only these fields will be used.")
            .define(self.RENAMES, ConfigType.LIST, [], None, Importance.MEDIUM, "Field rename mappings.")
            .define("blacklist", ConfigType.LIST, None, None, Importance.LOW, "Deprecated. Use exclude instead.")
            .define("whitelist", ConfigType.LIST, None, None, Importance.LOW, "Deprecated. Use include instead.")
        )  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.config_def().parse(configs)
        self.exclude = set(values[self.EXCLUDE] or values["blacklist"] or [])
        self.include = set(values[self.INCLUDE] or values["whitelist"] or [])
        self.renames = _parse_renames(self.RENAMES, values[self.RENAMES])

    def _kept(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: R) -> R | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            mapping = require_map(value, PURPOSE)
            updated = {self.renames.get(k, k): v for k, v in mapping.items() if self._kept(k)}
            return self.with_operated(record, None, updated)
        struct = require_struct(value, PURPOSE)
        require_struct_schema(schema, PURPOSE)
        kept = [f for f in schema.fields if self._kept(f.name)]
        new_schema = struct_schema(
            [(self.renames.get(f.name, f.name), f.schema) for f in kept],
            name=schema.name,
            version=schema.version,
            doc=schema.doc,
            optional=schema.optional,
        )
        out = Struct(new_schema)
        for f in kept:
            out.put(self.renames.get(f.name, f.name), struct.get(f.name))
        return self.with_operated(record, new_schema, out)


class ReplaceFieldKey(ReplaceField):
    on_key = True


class ReplaceFieldValue(ReplaceField):
    on_key = False
