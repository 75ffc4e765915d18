"""Source offsets in a local file: standalone mode's offsets store (Kafka Connect's
``FileOffsetBackingStore``, ``offset.storage.file.filename``).

Offsets are kept as the offsets topic keys and values (``offset_records``), so a task
reads and commits them exactly as in distributed mode. Every write replaces the file
atomically (a temporary file, fsync, rename), so a crash leaves either the old offsets
or the new ones, never a torn file. The file is JSON: a list of ``[key, value]``
pairs, base64-encoded, ``value`` null for an erased partition.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.storage import offset_records
from oncelog.connect.storage.offsets import OffsetsView


class FileOffsetStore:
    def __init__(self, path: str | Path, view: OffsetsView) -> None:
        self.path = Path(path)
        self.view = view
        self._lock = threading.Lock()
        self._data: dict[bytes, bytes | None] = {}

    def start(self) -> None:
        """Load the file (a missing file is an empty store)."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            pairs = json.loads(raw)
            data = {
                base64.b64decode(k): None if v is None else base64.b64decode(v) for k, v in pairs
            }
        except (ValueError, TypeError) as exc:
            raise ConnectException(f"Cannot read the offsets file {self.path}: {exc}") from None
        with self._lock:
            self._data = data
            for key, value in data.items():
                self._apply(key, value)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        try:
            self.view.apply(offset_records.decode(key, value))
        except ConnectException:
            pass  # not an offsets record of a known shape: kept in the file, not applied

    def _save(self) -> None:
        pairs = [
            [base64.b64encode(k).decode(), None if v is None else base64.b64encode(v).decode()]
            for k, v in self._data.items()
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(pairs, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    # -- the task's offset writer (and the KIP-618 copier of a separate offsets topic) -----

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        with self._lock:
            for key, value in records:
                raw = key.encode() if isinstance(key, str) else bytes(key)
                self._data[raw] = value
            self._save()
            for key, value in records:
                self._apply(key.encode() if isinstance(key, str) else bytes(key), value)

    def copy(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.write(records, 0)

    def close(self, timeout_s: float) -> None:
        pass

    # -- KIP-875 changes -------------------------------------------------------------------

    def write_offsets(
        self, connector: str, offsets: Mapping[Any, Mapping[str, Any] | None]
    ) -> None:
        records: list[tuple[bytes | str, bytes | None]] = [
            offset_records.encode(
                offset_records.OffsetRecord(
                    connector, dict(partition), None if offset is None else dict(offset)
                )
            )
            for partition, offset in offsets.items()
        ]
        self.write(records, 0)
