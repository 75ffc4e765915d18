"""Source offsets held in memory, keyed as Kafka Connect keys them.

:class:`MemoryOffsetStore` is the in-process view a worker builds by reading the
offsets topic (and what tests and direct task runs use). Partitions are JSON maps,
so they are stored under :func:`~oncelog.connect.api.connector.partition_key`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oncelog.connect.api.connector import OffsetStorageReader, partition_key
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.storage.internal_log import LogRecord
from oncelog.connect.storage.offset_records import OffsetRecord
from oncelog.connect.storage.offset_records import decode as decode_offset_record


class MemoryOffsetStore(OffsetStorageReader):
    """Committed offsets per source partition of one connector."""

    def __init__(self) -> None:
        self._offsets: dict[Any, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        with self._lock:
            out = {}
            for partition in partitions:
                key = partition_key(partition)
                if key in self._offsets:
                    out[key] = copy.deepcopy(self._offsets[key])
            return out

    def commit(self, offsets: Mapping[Any, Mapping[str, Any] | None]) -> None:
        """Store offsets by partition map or partition key; a None offset erases (a tombstone)."""
        with self._lock:
            for partition, offset in offsets.items():
                key = partition if isinstance(partition, tuple) else partition_key(partition)
                if offset is None:
                    self._offsets.pop(key, None)
                else:
                    self._offsets[key] = copy.deepcopy(dict(offset))

    def snapshot(self) -> dict[Any, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._offsets)


class OffsetsView:
    """Every connector's offsets as read from an offsets topic (last write wins; a
    tombstone erases). ``reader(connector)`` is what that connector's tasks see."""

    def __init__(self) -> None:
        self._stores: dict[str, MemoryOffsetStore] = {}

    def apply(self, record: OffsetRecord) -> None:
        self.reader(record.connector).commit({partition_key(record.partition): record.offset})

    def reader(self, connector: str) -> MemoryOffsetStore:
        return self._stores.setdefault(connector, MemoryOffsetStore())

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) pairs, as ``GET /connectors/{c}/offsets`` lists them."""
        store = self._stores.get(connector)
        if store is None:
            return []
        return [(_thaw(key), offset) for key, offset in store.snapshot().items()]


def _thaw(key: Any) -> dict[str, Any]:
    # Partition maps hold primitive values only (offset_records.validate_format).
    return dict(key)


class LayeredOffsetStore(MemoryOffsetStore):
    """A connector's view with a separate offsets topic (KIP-618 "smooth migration"):
    its own offsets first, then the worker's global ones for partitions it has none for.
    Commits go to its own layer only; the global topic receives copies separately.

    A tombstone in its own topic (a KIP-875 reset) hides the global offset of that
    partition. Kafka's ``ConnectorOffsetBackingStore`` falls back to the global topic
    there, where a copy written late (by a task that committed just before the reset, or
    a zombie's copier thread waking up) would bring an erased offset back."""

    def __init__(self, fallback: MemoryOffsetStore) -> None:
        super().__init__()
        self.fallback = fallback
        self._erased: set[Any] = set()

    def commit(self, offsets: Mapping[Any, Mapping[str, Any] | None]) -> None:
        super().commit(offsets)
        with self._lock:
            for partition, offset in offsets.items():
                key = partition if isinstance(partition, tuple) else partition_key(partition)
                if offset is None:
                    self._erased.add(key)
                else:
                    self._erased.discard(key)

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        wanted = list(partitions)
        with self._lock:
            erased = set(self._erased)
        merged = {k: v for k, v in self.fallback.offsets(wanted).items() if k not in erased}
        merged.update(super().offsets(wanted))
        return merged

    def merged(self) -> dict[Any, dict[str, Any]]:
        """Every partition's offset as the connector's tasks see it."""
        with self._lock:
            erased = set(self._erased)
        out = {k: v for k, v in self.fallback.snapshot().items() if k not in erased}
        out.update(self.snapshot())
        return out


def offsets_of(connector: str, store: MemoryOffsetStore) -> Callable[[LogRecord], None]:
    """Applies the offsets records of ``connector`` to ``store`` (others are skipped)."""

    def apply(record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            decoded = decode_offset_record(record.key, record.value)
        except ConnectException:
            return
        if decoded.connector == connector:
            store.commit({partition_key(decoded.partition): decoded.offset})

    return apply
