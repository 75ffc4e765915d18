"""Key -> latest offset map for one cleaning pass (the role of Kafka's OffsetMap).

Capacity is budgeted as Kafka budgets its dedupe buffer: 24 bytes per entry (a
16-byte hash and an 8-byte offset) at a 0.9 load factor, so
``log.cleaner.dedupe.buffer.size`` bounds how much of the dirty log one pass can
cover. Keys shorter than 16 bytes are stored as they are (cheaper than hashing,
and their length keeps them apart from the 16-byte MD5 digests of longer keys).
"""

from __future__ import annotations

import hashlib

ENTRY_BYTES = 24
LOAD_FACTOR = 0.9


def _slot(key: bytes) -> bytes:
    return key if len(key) < 16 else hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    def __init__(self, buffer_bytes: int) -> None:
        self.capacity = max(1, int(buffer_bytes // ENTRY_BYTES * LOAD_FACTOR))
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # highest offset put into the map

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def free(self) -> int:
        return self.capacity - len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[_slot(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """Latest offset of ``key``, -1 if the map has not seen it."""
        return self._offsets.get(_slot(key), -1)
