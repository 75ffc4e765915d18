"""Reading byte ranges of a file by descriptor (segment slices, response ranges), and
reading them only if the page cache already holds them."""

from __future__ import annotations

import errno
import os


def pread_exact(fd: int, position: int, length: int) -> bytes:
    """``length`` bytes at ``position``; raises OSError if the file is shorter."""
    parts, left = [], length
    while left > 0:
        chunk = os.pread(fd, left, position)
        if not chunk:
            raise OSError(f"file shorter than the range at {position}")
        parts.append(chunk)
        position += len(chunk)
        left -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class NotCachedError(BlockingIOError):
    """The bytes are not in the page cache: reading them would wait for the disk.

    ``warm()`` reads them in (blocking; call it from a worker thread, holding no lock),
    so the same read can then be done without waiting."""

    def __init__(self, message: str, fd: int = -1, position: int = 0, size: int = 0) -> None:
        super().__init__(errno.EAGAIN, message)
        self.fd, self.position, self.size = fd, position, size

    def warm(self) -> bool:
        """Read the missing bytes into the page cache, with readahead advice for what
        usually follows (more batch headers). False if there is nothing to warm (the
        caller must read the blocking way). The descriptor is the segment's own, not a
        duplicate: if the segment was closed meanwhile, the read fails or reads another
        file's pages, and either way the caller's next read decides."""
        if self.fd < 0:
            return False
        try:
            os.posix_fadvise(self.fd, self.position, WARM_AHEAD, os.POSIX_FADV_WILLNEED)
            os.pread(self.fd, self.size, self.position)
        except OSError:
            pass
        return True


WARM_AHEAD = 1 << 20


_nowait = hasattr(os, "preadv") and hasattr(os, "RWF_NOWAIT")


def pread_cached(fd: int, size: int, position: int) -> bytes:
    """Like ``os.pread``, but raises ``NotCachedError`` instead of waiting for the disk
    (``preadv`` with ``RWF_NOWAIT``). Short only at the end of the file. On a file system
    without non-blocking reads it reads normally (and stops trying)."""
    global _nowait
    if not _nowait:
        return os.pread(fd, size, position)
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    try:
        while got < size:
            n = os.preadv(fd, [view[got:]], position + got, os.RWF_NOWAIT)
            if n <= 0:
                break  # the end of the file
            got += n
    except BlockingIOError:
        raise NotCachedError(
            f"bytes at {position + got} are not cached", fd, position + got, size - got
        ) from None
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        _nowait = False
        return os.pread(fd, size, position)
    del view  # a bytearray with an exported buffer cannot be resized
    if got < size:
        del buf[got:]
    return bytes(buf)


_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}
