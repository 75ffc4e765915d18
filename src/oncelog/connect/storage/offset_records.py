"""Records of the offsets topic, as Kafka Connect stores source offsets.

Key: the JSON array ``["<connector>", {source partition}]``; value: the JSON source
offset, or a tombstone to erase it (KIP-875 resets). Both are JSON with schemas
disabled. Partition and offset maps may only hold primitive values (Kafka's
``OffsetUtils.validateFormat``). Keys are written with sorted fields so one
partition always has the same key bytes, which compaction relies on; readers parse
the JSON, so Kafka's own (unsorted) keys read the same.

Kafka's producer picks the offsets-topic partition by murmur2 of the key bytes; the
writer should use a murmur2 partitioner (librdkafka: ``murmur2_random``) so both
implementations place a key on the same partition.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oncelog.connect.api.errors import DataException

_PRIMITIVES = (str, int, float, bool, bytes)


def validate_format(data: Any) -> None:
    """Raise :class:`DataException` unless ``data`` is a map of string keys to
    primitive values (or None)."""
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise DataException("Offsets must be specified as a Map")
    for field, value in data.items():
        if not isinstance(field, str):
            raise DataException("Offsets may only use String keys")
        if value is not None and not isinstance(value, _PRIMITIVES):
            raise DataException(
                f"Offsets may only contain primitive types as values, but field {field} contains {type(value).__name__}"
            )


@dataclass(frozen=True)
class OffsetRecord:
    connector: str
    partition: dict[str, Any]
    offset: dict[str, Any] | None  # None: erased


def encode_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    validate_format(partition)
    return json.dumps(
        [connector, dict(partition)], separators=(",", ":"), sort_keys=True, default=_bytes
    ).encode()


def _bytes(value: Any) -> str:
    # Kafka's schemaless JsonConverter writes bytes as base64 strings.
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def encode(record: OffsetRecord) -> tuple[bytes, bytes | None]:
    validate_format(record.offset)
    value = (
        None
        if record.offset is None
        else json.dumps(
            record.offset, separators=(",", ":"), sort_keys=True, default=_bytes
        ).encode()
    )
    return encode_key(record.connector, record.partition), value


def decode(key: bytes, value: bytes | None) -> OffsetRecord:
    """Parse one record; raises :class:`DataException` for keys in an unexpected format
    (Kafka logs and ignores those)."""
    try:
        parsed_key = json.loads(key)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataException(f"Ignoring offset partition key with unparseable JSON: {exc}") from exc
    if not isinstance(parsed_key, list) or len(parsed_key) != 2:
        raise DataException(f"Ignoring offset partition key with an unexpected format: {key!r}")
    connector, partition = parsed_key
    if not isinstance(connector, str) or not connector:
        raise DataException(
            f"Ignoring offset partition key with an unexpected connector name: {key!r}"
        )
    if not isinstance(partition, dict):
        raise DataException(
            f"Ignoring offset partition key with an unexpected partition format: {key!r}"
        )
    offset = None
    if value is not None:
        try:
            offset = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataException(f"Ignoring offset with unparseable JSON: {exc}") from exc
        if not isinstance(offset, dict):
            raise DataException(f"Ignoring offset with an unexpected format: {value!r}")
    return OffsetRecord(connector, partition, offset)
