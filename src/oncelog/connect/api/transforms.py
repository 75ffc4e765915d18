"""Single Message Transforms: the plugin interfaces and helpers shared by the built-ins.

A :class:`Transformation` maps one record to one record, or to None to drop it. A
:class:`Predicate` decides whether a transformation applies to a record (KIP-585).
Built-ins that can work on either side of a record come in ``Key`` and ``Value``
flavours, as Kafka's ``InsertField$Key`` / ``InsertField$Value`` do.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from oncelog.connect.api.config import ConfigDef
from oncelog.connect.api.data import Schema, SchemaType, Struct
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.records import ConnectRecord

R = TypeVar("R", bound=ConnectRecord)


class Transformation(abc.ABC):
    """Kafka's ``Transformation``: configured once, then ``apply`` per record."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Receive the ``transforms.<alias>.`` settings with that prefix stripped."""
        return None

    @abc.abstractmethod
    def apply(self, record: R) -> R | None: ...

    def close(self) -> None:
        return None


class Predicate(abc.ABC):
    """Kafka's ``Predicate`` (``predicates.<alias>.type``)."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, configs: Mapping[str, Any]) -> None:
        return None

    @abc.abstractmethod
    def test(self, record: ConnectRecord) -> bool: ...

    def close(self) -> None:
        return None


class KeyOrValue(Transformation):
    """A transformation that works on the key (``Key`` subclass) or the value."""

    on_key: ClassVar[bool] = False

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.on_key else record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key if self.on_key else record.value

    def with_operated(self, record: R, schema: Schema | None, value: Any) -> R:
        if self.on_key:
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def require_map(value: Any, purpose: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        found = "null" if value is None else type(value).__name__
        raise DataException(
            f"Only Map objects supported in absence of schema for [{purpose}], found: {found}"
        )
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        found = "null" if value is None else type(value).__name__
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {found}")
    return value


def require_struct_schema(schema: Schema, purpose: str) -> Schema:
    if schema.type is not SchemaType.STRUCT:
        raise DataException(
            f"Only Struct objects supported for [{purpose}], found: {schema.type.name}"
        )
    return schema
