"""Small durable files of a partition directory besides the segments.

* ``log-start-offset.checkpoint``: the log start offset (DeleteRecords can move
  it inside a segment, so it cannot be derived from file names). Kafka keeps one
  such file per data dir; one per partition keeps partitions independent.
* ``<offset>.snapshot``: ProducerStateManager.snapshot() bytes at that log end.
* ``.clean_shutdown``: written last by close(); lets open() skip the CRC walk.
All are replaced atomically (temp file + fsync + rename + directory fsync).

A broker closing thousands of partitions writes instead one clean-shutdown checkpoint
for all of them (Kafka's one ``.kafka_cleanshutdown`` per log dir): each partition's log
end and its producer state at that end, so neither shutdown nor start touches a small
file per partition (on this kind of disk each create, rename or unlink costs ~2 ms).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .fsutil import atomic_write, fsync_dir
from .segment import offset_file_name, parse_offset_file_name

LOG_START_FILE = "log-start-offset.checkpoint"
CLEANER_FILE = "cleaner-offset.checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
SNAPSHOT_SUFFIX = ".snapshot"
_VERSION = 0


def read_log_start(directory: Path) -> int | None:
    try:
        lines = (directory / LOG_START_FILE).read_text().split()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if len(lines) != 2 or lines[0] != str(_VERSION):
        return None
    try:
        value = int(lines[1])
    except ValueError:
        return None
    return value if value >= 0 else None


def write_log_start(directory: Path, offset: int) -> None:
    atomic_write(directory / LOG_START_FILE, f"{_VERSION}\n{offset}\n".encode())


def read_cleaner_offset(directory: Path) -> int | None:
    """First dirty offset of a compacted log (Kafka's cleaner-offset-checkpoint)."""
    try:
        lines = (directory / CLEANER_FILE).read_text().split()
        if len(lines) == 2 and lines[0] == str(_VERSION) and int(lines[1]) >= 0:
            return int(lines[1])
    except (FileNotFoundError, UnicodeDecodeError, ValueError):
        pass
    return None


def write_cleaner_offset(directory: Path, offset: int) -> None:
    atomic_write(directory / CLEANER_FILE, f"{_VERSION}\n{offset}\n".encode())


def write_clean_shutdown(directory: Path, log_end_offset: int) -> None:
    atomic_write(directory / CLEAN_SHUTDOWN_FILE, f"{log_end_offset}\n".encode())


def take_clean_shutdown(directory: Path, *, sync: bool = True) -> int | None:
    """The log end recorded by a clean shutdown, removing the marker durably first,
    so a crash after this open can never be mistaken for a clean stop.

    ``sync=False``: the caller syncs the filesystem before anything is appended (the
    broker does once all partitions are open, before it listens)."""
    path = directory / CLEAN_SHUTDOWN_FILE
    try:
        text = path.read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    path.unlink()
    if sync:
        fsync_dir(directory)
    try:
        return int(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class CleanShutdown:
    """One partition's entry in the clean-shutdown checkpoint."""

    log_end_offset: int
    producer_snapshot: bytes | None  # ProducerStateManager.snapshot() at that end, if new


def write_clean_shutdowns(path: Path, entries: dict[str, CleanShutdown]) -> None:
    """The checkpoint for all partitions closed cleanly, keyed by directory name. Written
    (and fsynced) only after the data and indexes it vouches for are durable."""
    doc = {
        "version": _VERSION,
        "logs": {
            name: [
                e.log_end_offset,
                None if e.producer_snapshot is None else e.producer_snapshot.hex(),
            ]
            for name, e in entries.items()
        },
    }
    atomic_write(path, json.dumps(doc, separators=(",", ":")).encode())


def take_clean_shutdowns(path: Path) -> dict[str, CleanShutdown]:
    """Read the checkpoint and remove it durably before any partition opens, so a crash
    after this start can never be mistaken for a clean stop. A damaged file vouches for
    nothing (every partition is then recovered)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    path.unlink()
    fsync_dir(path.parent)
    try:
        doc = json.loads(raw)
        if doc.get("version") != _VERSION:
            return {}
        return {
            name: CleanShutdown(int(end), None if snap is None else bytes.fromhex(snap))
            for name, (end, snap) in doc["logs"].items()
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / offset_file_name(offset, SNAPSHOT_SUFFIX)


def list_snapshots(directory: Path) -> list[int]:
    offsets = []
    for name in os.listdir(directory):
        offset = parse_offset_file_name(name, SNAPSHOT_SUFFIX)
        if offset is not None:
            offsets.append(offset)
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, data: bytes) -> None:
    atomic_write(snapshot_path(directory, offset), data)


def delete_snapshot(directory: Path, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        snapshot_path(directory, offset).unlink()
