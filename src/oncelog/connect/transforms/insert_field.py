"""``InsertField``: add record metadata (topic, partition, offset, timestamp) or a static
value as fields, Kafka's ``org.apache.kafka.connect.transforms.InsertField``.

A field name may end with ``!`` (required field in the new schema) or ``?`` (optional,
the default).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    Struct,
    struct_schema,
    timestamp_schema,
)
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.records import SinkRecord
from oncelog.connect.api.transforms import (
    KeyOrValue,
    R,
    require_map,
    require_struct,
    require_struct_schema,
)

PURPOSE = "field insertion"


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    optional: bool

    @classmethod
    def parse(cls, spec: str | None) -> _FieldSpec | None:
        if not spec:
            return None
        if spec.endswith("?"):
            return cls(spec[:-1], True)
        if spec.endswith("!"):
            return cls(spec[:-1], False)
        return cls(spec, True)


class InsertField(KeyOrValue):
    TOPIC_FIELD = "topic.field"
    PARTITION_FIELD = "partition.field"
    OFFSET_FIELD = "offset.field"
    TIMESTAMP_FIELD = "timestamp.field"
    STATIC_FIELD = "static.field"
    STATIC_VALUE = "static.value"

    def config_def(self) -> ConfigDef:
        suffix = " Suffix with <code>!</code> to make this a required field, or <code>?</code> to keep it optional (the default)."
        return (
            ConfigDef()
            .define(self.TOPIC_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM, "Field name for Kafka topic." + suffix)
            .define(self.PARTITION_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM, "Field name for Kafka partition." + suffix)
            .define(self.OFFSET_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM,
                    "Field name for Kafka offset - only applicable to sink connectors." + suffix)
            .define(self.TIMESTAMP_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM, "Field name for record timestamp." + suffix)
            .define(self.STATIC_FIELD, ConfigType.STRING, None, None, Importance.MEDIUM, "Field name for static data field." + suffix)
            .define(self.STATIC_VALUE, ConfigType.STRING, None, None, Importance.MEDIUM, "Static field value, if field name configured.")
        )  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.config_def().parse(configs)
        self.topic_field = _FieldSpec.parse(values[self.TOPIC_FIELD])
        self.partition_field = _FieldSpec.parse(values[self.PARTITION_FIELD])
        self.offset_field = _FieldSpec.parse(values[self.OFFSET_FIELD])
        self.timestamp_field = _FieldSpec.parse(values[self.TIMESTAMP_FIELD])
        self.static_field = _FieldSpec.parse(values[self.STATIC_FIELD])
        self.static_value = values[self.STATIC_VALUE]
        if not any(
            (
                self.topic_field,
                self.partition_field,
                self.offset_field,
                self.timestamp_field,
                self.static_field,
            )
        ):
            raise DataException("No field insertion configured")
        if self.static_field is not None and self.static_value is None:
            raise DataException("No value specified for static field: " + self.static_field.name)

    def apply(self, record: R) -> R | None:
        value = self.operating_value(record)
        if value is None:
            return record  # tombstones pass through unchanged
        schema = self.operating_schema(record)
        inserts = self._inserts(record)
        if schema is None:
            updated = dict(require_map(value, PURPOSE))
            for spec, _schema, inserted in inserts:
                updated[spec.name] = inserted
            return self.with_operated(record, None, updated)
        struct = require_struct(value, PURPOSE)
        require_struct_schema(schema, PURPOSE)
        fields = [(f.name, f.schema) for f in schema.fields]
        for spec, field_schema, _ in inserts:
            fields.append(
                (spec.name, field_schema.as_optional() if spec.optional else field_schema)
            )
        new_schema = struct_schema(
            fields,
            name=schema.name,
            version=schema.version,
            doc=schema.doc,
            optional=schema.optional,
        )
        out = Struct(new_schema)
        for f in schema.fields:
            out.put(f.name, struct.get(f.name))
        for spec, _schema, inserted in inserts:
            if inserted is not None and spec.name == (
                self.timestamp_field.name if self.timestamp_field else None
            ):
                inserted = dt.datetime.fromtimestamp(inserted / 1000, tz=dt.UTC)
            out.put(spec.name, inserted)
        return self.with_operated(record, new_schema, out)

    def _inserts(self, record: R) -> list[tuple[_FieldSpec, Schema, Any]]:
        inserts: list[tuple[_FieldSpec, Schema, Any]] = []
        if self.topic_field:
            inserts.append((self.topic_field, STRING_SCHEMA, record.topic))
        if self.partition_field:
            inserts.append((self.partition_field, INT32_SCHEMA, record.kafka_partition))
        if self.offset_field:
            if not isinstance(record, SinkRecord):
                raise DataException(
                    f"Only SinkRecord supported for [{PURPOSE}], found: {type(record).__name__}"
                )
            inserts.append((self.offset_field, INT64_SCHEMA, record.kafka_offset))
        if self.timestamp_field:
            inserts.append((self.timestamp_field, timestamp_schema(), record.timestamp))
        if self.static_field:
            inserts.append((self.static_field, STRING_SCHEMA, self.static_value))
        return inserts


class InsertFieldKey(InsertField):
    on_key = True


class InsertFieldValue(InsertField):
    on_key = False
