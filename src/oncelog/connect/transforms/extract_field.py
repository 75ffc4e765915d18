"""``ExtractField``: replace the key or value with one of its fields, Kafka's
``org.apache.kafka.connect.transforms.ExtractField``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.transforms import KeyOrValue, R, require_map, require_struct

PURPOSE = "field extraction"


class ExtractField(KeyOrValue):
    FIELD = "field"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(self.FIELD, ConfigType.STRING, importance=Importance.MEDIUM,
                                  documentation="Field name to extract.")  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.field: str = self.config_def().parse(configs)[self.FIELD]

    def apply(self, record: R) -> R | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            if value is None:
                return self.with_operated(record, None, None)
            return self.with_operated(record, None, require_map(value, PURPOSE).get(self.field))
        field = schema.field(self.field)
        if field is None:
            raise DataException("Unknown field: " + self.field)
        extracted = None if value is None else require_struct(value, PURPOSE).get(self.field)
        return self.with_operated(record, field.schema, extracted)


class ExtractFieldKey(ExtractField):
    on_key = True


class ExtractFieldValue(ExtractField):
    on_key = False
