"""Start-up failures reported by their real cause, in one line: the data directory (missing
rights, a file in the way) or a listener's port (in use, privileged)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class StartupError(RuntimeError):
    """The broker cannot start; the message is the whole story, no traceback needed."""


def os_reason(exc: OSError) -> str:
    """``permission denied``, ``address already in use``, ...: strerror in lower case."""
    # asyncio wraps bind errors ("error while attempting to bind on address ..."): the
    # errno's own text is the cause.
    text = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
    return text[0].lower() + text[1:] if text else text


def check_data_dir(path: Path) -> None:
    """Create the data directory if needed and prove it writable, or raise StartupError."""
    if path.exists() and not path.is_dir():
        raise StartupError(f"data directory {path} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise StartupError(f"cannot create data directory {path}{where}: {os_reason(exc)}") from exc
    try:
        fd, probe = tempfile.mkstemp(prefix=".oncelog-write-probe-", dir=path)
    except OSError as exc:
        raise StartupError(f"data directory {path} is not writable: {os_reason(exc)}") from exc
    os.close(fd)
    os.unlink(probe)


class ListenError(StartupError):
    def __init__(self, listener: str, host: str, port: int, exc: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port} ({listener}): {os_reason(exc)}")
