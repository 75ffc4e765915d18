"""Reading an exact byte range of a file by descriptor (segment slices, response ranges)."""

from __future__ import annotations

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
