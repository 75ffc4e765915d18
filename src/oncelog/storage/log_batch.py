"""Opening and closing many partition logs at once (start-up, shutdown, big topics).

One filesystem sync for all of them instead of a few fsyncs each, from
``SYNCFS_MIN_LOGS`` logs on; below that, each log syncs its own files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .checkpoint import CleanShutdown, write_clean_shutdowns
from .fsutil import sync_filesystem
from .unified_log import UnifiedLog

__all__ = ["SYNCFS_MIN_LOGS", "close_logs", "open_logs"]


# Below this many partitions, each is synced on its own (a few fsyncs of its own files);
# from here on one syncfs(2) is cheaper. syncfs also flushes every other process's dirty
# data on the filesystem, which on a busy machine can take many seconds: a broker with a
# handful of partitions must not start, create a topic or shut down at that cost.
SYNCFS_MIN_LOGS = 128


def open_logs(
    data_dir: Path,
    opens: Sequence[Callable[[bool], UnifiedLog]],
    *,
    syncfs_min: int = SYNCFS_MIN_LOGS,
) -> list[UnifiedLog]:
    """Run many ``UnifiedLog.open`` calls (each opener takes the ``sync`` flag). From
    ``SYNCFS_MIN_LOGS`` on, they write unsynced and one filesystem sync makes it all
    durable: thousands of partitions cost one journal commit, not a few fsyncs each
    (Kafka's start-up likewise flushes nothing per partition)."""
    if len(opens) < syncfs_min:
        return [open_one(True) for open_one in opens]
    logs: list[UnifiedLog] = []
    try:
        for open_one in opens:
            logs.append(open_one(False))
    finally:
        sync_filesystem(data_dir)
    return logs


def close_logs(
    logs: Iterable[UnifiedLog],
    data_dir: Path,
    checkpoint: Path,
    *,
    syncfs_min: int = SYNCFS_MIN_LOGS,
) -> list[tuple[Path, Exception]]:
    """Close many logs cleanly with one filesystem sync and one checkpoint file, instead
    of ~7 fsyncs and a few new files per partition (fewer than ``SYNCFS_MIN_LOGS``: each
    is closed the single way).

    Index tails are written unsynced; one sync makes them and the log data durable;
    only then is the clean-shutdown checkpoint (log ends and producer states, see
    ``checkpoint.write_clean_shutdowns``) written, so it never vouches for data not on
    disk. ``UnifiedLog.open(clean=...)`` takes an entry back. A log that fails, or
    takes an append meanwhile, is closed the single way. Returns the failures."""
    failed: list[tuple[Path, Exception]] = []
    written: list[tuple[UnifiedLog, CleanShutdown]] = []
    open_logs_ = [part for part in logs if not part.closed]
    if len(open_logs_) < syncfs_min:  # few: each the single way (see SYNCFS_MIN_LOGS)
        for part in open_logs_:
            try:
                part.close()
            except Exception as exc:
                failed.append((part.directory, exc))
        return failed
    for part in open_logs_:
        try:
            written.append((part, part.write_out_for_checkpoint()))
        except Exception as exc:
            failed.append((part.directory, exc))
    sync_filesystem(data_dir)
    write_clean_shutdowns(checkpoint, {p.directory.name: entry for p, entry in written})
    for part, entry in written:
        try:
            if not part.release_if_at(entry.log_end_offset):
                part.close()
        except Exception as exc:
            failed.append((part.directory, exc))
    return failed
