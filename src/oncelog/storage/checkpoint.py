"""Small durable files of a partition directory besides the segments.

* ``log-start-offset.checkpoint``: the log start offset (DeleteRecords can move
  it inside a segment, so it cannot be derived from file names). Kafka keeps one
  such file per data dir; one per partition keeps partitions independent.
* ``<offset>.snapshot``: ProducerStateManager.snapshot() bytes at that log end.
* ``.clean_shutdown``: written last by close(); lets open() skip the CRC walk.
All are replaced atomically (temp file + fsync + rename + directory fsync).
"""

from __future__ import annotations

import contextlib
import os
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


def take_clean_shutdown(directory: Path) -> int | None:
    """The log end recorded by a clean shutdown, removing the marker durably first,
    so a crash after this open can never be mistaken for a clean stop."""
    path = directory / CLEAN_SHUTDOWN_FILE
    try:
        text = path.read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    path.unlink()
    fsync_dir(directory)
    try:
        return int(text)
    except ValueError:
        return None


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
