"""A log releases every descriptor it opened: segments replaced by the cleaner, deleted
by retention or dropped by recovery must not keep files open in a long-running broker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from oncelog.storage.checkpoint import CLEAN_SHUTDOWN_FILE
from oncelog.storage.compaction import compact_log

from .test_storage_support import NOW, append, config, open_log

CFG = config(
    segment_bytes=600,
    index_interval_bytes=100,
    cleanup_policy="compact,delete",
    retention_ms=60_000,
    file_delete_delay_ms=0,
)


def _open_fds() -> set[str]:
    """Descriptors of files under the test's temp dirs: sockets, pipes and files that
    other threads of a long test session (client libraries) open come and go meanwhile."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(tempfile.gettempdir()):
            out.add(f"{fd}->{target}")
    return out


def _fill(path: Path, batches: int, now: int = NOW) -> None:
    log = open_log(path, CFG, now)
    for i in range(batches):
        append(log, 3, now=now, tag=i % 4)
    log.close()


def test_cleaner_swap_and_retention_release_their_descriptors(tmp_path: Path) -> None:
    before = _open_fds()
    log = open_log(tmp_path / "t-0", CFG)
    for i in range(60):
        append(log, 3, tag=i % 4)
    old = list(log.segments)
    assert compact_log(log, now_ms=NOW + 1, dedupe_buffer_bytes=1 << 20) is not None
    assert sum(seg not in log.segments for seg in old) == len(old) - 1  # all but the active
    log.maybe_flush(NOW + 2)  # the swapped-out segments' delayed delete
    # Emptied segments age by their file's mtime (wall clock): retain past any of it.
    later = 4_000_000_000_000
    assert log.apply_retention(later) == len(old)  # rolls first, as in Kafka
    log.maybe_flush(later + 1)
    log.close()
    assert _open_fds() - before == set()


def test_recovery_releases_the_descriptors_of_dropped_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _fill(d, 60)
    # Corrupt the first segment's bytes and drop its indexes: recovery cuts the log there
    # and deletes the later segments.
    (first,) = [n for n in sorted(os.listdir(d)) if n.endswith(".log")][:1]
    with open(d / first, "r+b") as f:
        f.seek(70)
        f.write(b"\xff" * 8)
    for n in os.listdir(d):
        if n.startswith(first[:-4]) and n.endswith((".index", ".timeindex")):
            os.unlink(d / n)
    (d / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    before = _open_fds()
    log = open_log(d, CFG)
    assert len(log.segments) == 1
    log.close()
    assert _open_fds() - before == set()


def test_abandon_releases_the_files_without_a_clean_shutdown(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    before = _open_fds()
    log = open_log(d, CFG)
    for i in range(20):
        append(log, 3, tag=i)
    segments = len(log.segments)
    assert segments > 1
    log.abandon()
    assert log.closed
    assert _open_fds() - before == set()
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    log.abandon()  # a second time is a no-op
    again = open_log(d, CFG)
    assert (again.log_end_offset, len(again.segments)) == (60, segments)
    again.close()
