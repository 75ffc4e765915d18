"""One process per data directory: an exclusive ``flock`` on ``DATA_DIR/.lock``.

Kafka's ``LogManager`` locks each log dir (a ``.lock`` file, ``FileLock.tryLock``) before it
reads anything, and refuses to start with "Failed to acquire lock ... another process is
using this directory". Two brokers on one data directory would each append at offsets the
other also hands out, rewrite each other's metadata and delete each other's clean-shutdown
marker: acknowledged records lost. The lock is taken before anything else in the directory
is read or written and held for the life of the process (the kernel drops it when the
process dies, even by SIGKILL, so a crash leaves no stale lock). The file holds the
holder's pid, for the refusal message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_NAME = ".lock"


class DataDirInUse(RuntimeError):
    """Another live process holds the data directory's lock."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"{path} is in use by another oncelog process ({holder})")
        self.path = path
        self.pid = pid


class DataDirLock:
    """The held lock; :meth:`release` (or process exit) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Create ``data_dir`` if needed and lock it, or raise :class:`DataDirInUse`
        (nothing in the directory is changed then). OSError: cannot create or open it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise DataDirInUse(data_dir, pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(data_dir, fd)

    def release(self) -> None:
        if self._fd is not None:
            # The file stays: removing it would let a third process lock a new inode
            # while a second still waits on the old one.
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
