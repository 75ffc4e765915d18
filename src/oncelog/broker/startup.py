"""Start-up failures reported by their real cause, in one line: the data directory (missing
rights, a file in the way) or a listener's port (in use, privileged)."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path

from oncelog.storage.dir_lock import DataDirInUse, DataDirLock


class StartupError(RuntimeError):
    """The broker cannot start; the message is the whole story, no traceback needed."""


def os_reason(exc: OSError) -> str:
    """``permission denied``, ``address already in use``, ...: strerror in lower case."""
    # asyncio wraps bind errors ("error while attempting to bind on address ..."): the
    # errno's own text is the cause.
    text = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
    return text[0].lower() + text[1:] if text else text


def lock_data_dir(path: Path) -> DataDirLock:
    """Create the data directory if needed, lock it for this process and prove it
    writable, or raise StartupError (another process holds it: nothing was changed)."""
    if path.exists() and not path.is_dir():
        raise StartupError(f"data directory {path} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise StartupError(f"cannot create data directory {path}{where}: {os_reason(exc)}") from exc
    try:
        lock = DataDirLock.acquire(path)
    except DataDirInUse as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        raise StartupError(f"data directory {path} is not writable: {os_reason(exc)}") from exc
    try:
        # An existing .lock opens even in a directory that no longer takes new files.
        fd, probe = tempfile.mkstemp(prefix=".oncelog-write-probe-", dir=path)
    except OSError as exc:
        lock.release()
        raise StartupError(f"data directory {path} is not writable: {os_reason(exc)}") from exc
    os.close(fd)
    os.unlink(probe)
    return lock


def listen_socket(host: str, port: int, *, backlog: int) -> socket.socket:
    """A bound, listening TCP socket (OSError if the address is taken). Bound before the
    data directory is touched, so a port conflict changes nothing there. An empty host
    binds every interface, IPv4 and IPv6 where the system has both (Java's wildcard
    address, which Kafka's ``SocketServer`` binds for an empty host)."""
    if not host:
        if socket.has_dualstack_ipv6():
            try:
                return socket.create_server(
                    ("", port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True
                )
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise
        return socket.create_server(("", port), backlog=backlog)
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family = infos[0][0]
    address = infos[0][4]
    return socket.create_server(address, family=family, backlog=backlog)


class ListenError(StartupError):
    def __init__(self, listener: str, host: str, port: int, exc: OSError) -> None:
        super().__init__(f"cannot listen on {host or '*'}:{port} ({listener}): {os_reason(exc)}")
