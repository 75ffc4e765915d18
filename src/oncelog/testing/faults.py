"""Kill points for fault-injection tests of the exactly-once Spark sink.

A test runs the Spark driver as the leader of its own session (``start_new_session=True``)
and sets ``ONCELOG_SPARK_KILL_AT=<point>[@<batchId>]`` (points: oncelog.spark.hooks.POINTS).
When the sink reaches that point (in the executor or in the driver's commit worker), it
SIGKILLs the whole driver session: the driver's Python process, the JVM and every Python
worker. Nothing runs unless the driver application armed it (:func:`arm`): that exports
``ONCELOG_SPARK_KILL_SID`` = its own session id, so a stray variable can never kill an
unrelated process tree, and installs :func:`maybe_kill` as the data source's hook.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from oncelog.spark.hooks import HOOK_ENV, POINTS

KILL_AT_ENV = "ONCELOG_SPARK_KILL_AT"
KILL_SID_ENV = "ONCELOG_SPARK_KILL_SID"
HOOK = "oncelog.testing.faults:maybe_kill"


def arm() -> bool:
    """Called by a driver application that leads its own session: allows kill points to
    kill this session. Returns whether a kill point is configured."""
    if os.getsid(0) != os.getpid():
        return False
    os.environ[KILL_SID_ENV] = str(os.getpid())
    os.environ[HOOK_ENV] = HOOK
    return bool(os.environ.get(KILL_AT_ENV))


def parse(spec: str) -> tuple[str, int | None]:
    point, _, batch = spec.strip().partition("@")
    if point not in POINTS:
        raise ValueError(f"{KILL_AT_ENV}: unknown kill point {point!r}; known: {', '.join(POINTS)}")
    return point, int(batch) if batch else None


def maybe_kill(point: str, batch_id: int) -> None:
    spec = os.environ.get(KILL_AT_ENV)
    if not spec:
        return
    want, batch = parse(spec)
    if want != point or (batch is not None and batch != batch_id):
        return
    sid = os.environ.get(KILL_SID_ENV)
    if not sid or int(sid) != os.getsid(0):
        return
    kill_session(int(sid))


def session_members(sid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state (field 3); the session id is field 6
        if int(fields[3]) == sid:
            out.append(int(name))
    return out


def kill_session(sid: int) -> None:
    """SIGKILL every process of session sid (the caller last, if it belongs to it)."""
    me = os.getpid()
    for _ in range(3):
        members = [p for p in session_members(sid) if p != me]
        if not members:
            break
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    if os.getsid(0) == sid:
        os.kill(me, signal.SIGKILL)


PAUSE_AT_ENV = "ONCELOG_SPARK_PAUSE_AT"
PAUSE_FILE_ENV = "ONCELOG_SPARK_PAUSE_FILE"
PAUSE_HOOK = "oncelog.testing.faults:pause"
PAUSE_MAX_S = 300.0


def pause(point: str, batch_id: int) -> None:
    """A hook (``ONCELOG_SPARK_HOOK=oncelog.testing.faults:pause``) that holds the first
    process reaching ``ONCELOG_SPARK_PAUSE_AT=<point>[@<batchId>]`` there, so that a test
    can kill something at a known moment: e.g. a write task after its flush, transaction
    open, while the test SIGKILLs the executor running it. That process first creates
    ``ONCELOG_SPARK_PAUSE_FILE`` holding its pid (exclusively, so a retried task that
    reaches the point again goes on), then sleeps until killed, at most PAUSE_MAX_S.
    Unlike the kill points it needs no session of its own: executors of a cluster are
    not in the driver's session."""
    spec, marker = os.environ.get(PAUSE_AT_ENV), os.environ.get(PAUSE_FILE_ENV)
    if not spec or not marker:
        return
    want, batch = parse(spec)
    if want != point or (batch is not None and batch != batch_id):
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(PAUSE_MAX_S)


def evict_file_pages(path: Path) -> int:
    """Drop one file's pages from the page cache, as reclaim would; returns its size.
    Only clean pages can be dropped, so the file is synced first."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        size = os.fstat(fd).st_size
        os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)
        return size
    finally:
        os.close(fd)


def evict_segment_pages(data_dir: Path, topic: str) -> int:
    """Drop the topic's segment pages from the page cache; returns the bytes evicted."""
    return sum(evict_file_pages(path) for path in data_dir.rglob(f"{topic}-*/*.log"))
