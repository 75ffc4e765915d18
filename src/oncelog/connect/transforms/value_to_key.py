"""``ValueToKey``: replace the key with fields copied from the value, Kafka's
``org.apache.kafka.connect.transforms.ValueToKey``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigException, ConfigType, Importance
from oncelog.connect.api.data import Struct, struct_schema
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.transforms import R, Transformation, require_map, require_struct

PURPOSE = "copying fields from value to key"


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, "" if value is not None else None, "Empty list")


class ValueToKey(Transformation):
    FIELDS = "fields"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(self.FIELDS, ConfigType.LIST, validator=_non_empty_list, importance=Importance.HIGH,
                                  documentation="Field names on the record value to extract as the record key.")  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.fields: list[str] = self.config_def().parse(configs)[self.FIELDS]

    def apply(self, record: R) -> R | None:
        if record.value_schema is None:
            value = require_map(record.value, PURPOSE)
            return record.new_record(key_schema=None, key={f: value.get(f) for f in self.fields})
        struct = require_struct(record.value, PURPOSE)
        picked = []
        for name in self.fields:
            field = record.value_schema.field(name)
            if field is None:
                raise DataException("Field does not exist: " + name)
            picked.append((name, field.schema))
        key_schema = struct_schema(picked)
        key = Struct(key_schema)
        for name, _ in picked:
            key.put(name, struct.get(name))
        return record.new_record(key_schema=key_schema, key=key)
