"""Durable producer-id allocation in blocks, like Kafka's controller.

A block is reserved on disk before any id in it is handed out, so ids are
never reused after a crash (at worst the rest of a block is skipped).
"""

from __future__ import annotations

import json
from pathlib import Path

from oncelog.storage.fsutil import atomic_write

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0
        self._block_end = 0
        self._reserved_until = 0

    def load(self) -> None:
        if self.path.exists():
            self._reserved_until = int(json.loads(self.path.read_text())["next_block_start"])
        self._next = self._block_end = self._reserved_until

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._reserved_until = self._next + BLOCK_SIZE
            atomic_write(self.path, json.dumps({"next_block_start": self._reserved_until}).encode())
            self._block_end = self._reserved_until
        pid = self._next
        self._next += 1
        return pid
