"""Small durable-file helpers shared by storage and broker metadata."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: Path) -> None:
    """Make every write to the filesystem holding ``path`` durable, in one call.

    Thousands of partitions opened or closed together each write a few small files; one
    syncfs(2) after all of them costs one journal commit instead of one per file (the
    callers order their writes around it, see ``log_batch.close_logs``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        syncfs = getattr(_libc, "syncfs", None)
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


SECRET_FILE_MODE = 0o600
"""Credential and ACL files: readable by the broker's user only."""


def restrict_mode(path: Path) -> None:
    """Bring a secret file written before modes were set down to ``SECRET_FILE_MODE``."""
    if path.exists() and path.stat().st_mode & 0o077:
        path.chmod(SECRET_FILE_MODE)


def atomic_write(path: Path, data: bytes, *, sync: bool = True, mode: int = 0o644) -> None:
    """Write via a temp file, fsync, rename and fsync the directory, so a crash
    leaves either the old or the new content, never a torn file. ``mode``: the new
    file's permissions (secrets pass 0o600; the umask still applies).

    ``sync=False`` skips both fsyncs: the caller makes the file durable later with
    ``sync_filesystem`` (the rename still never exposes a torn file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()  # a leftover keeps its old mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
