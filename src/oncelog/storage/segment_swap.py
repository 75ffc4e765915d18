"""Crash-safe replacement of old segments by a cleaned one (Kafka's swap protocol).

1. The cleaner writes ``<base>.{log,index,timeindex,txnindex,range}.cleaned`` and
   fsyncs them. A crash here leaves only ``.cleaned`` files: recovery deletes
   them and the log is the old one.
2. ``stage``: the index and range files become ``.swap``, the directory is
   fsynced, then the log file becomes ``<base>.log.swap`` and the directory is
   fsynced again. That last rename is the commit point: from then on recovery
   completes the swap.
3. ``finish`` (under the log's lock, after the old segments were renamed to
   ``*.deleted``): index files, then the log file, drop ``.swap``.

``recover`` runs before a log is loaded. For each ``<base>.log.swap`` it deletes
every old segment inside the range the swap replaces (named in the range file),
then finishes the renames; leftover ``.cleaned`` and orphan ``.swap`` files go.
Nothing kept is lost: either the old segments or the complete, fsynced cleaned
one are in place at every instant.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from .cleaner import CLEANED_SUFFIX, RANGE_SUFFIX, SWAP_SUFFIX
from .fsutil import fsync_dir
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    parse_offset_file_name,
)

log = logging.getLogger(__name__)

_INDEXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# A directory holding no file with these endings has no swap to recover.
LEFTOVER_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX)
_SEGMENT_FILES = (LOG_SUFFIX, *_INDEXES)


def _path(directory: Path, base: int, suffix: str, stage: str = "") -> Path:
    return directory / (offset_file_name(base, suffix) + stage)


def stage(directory: Path, base: int) -> None:
    """``.cleaned`` -> ``.swap``; the log file last (the commit point)."""
    for suffix in (*_INDEXES, RANGE_SUFFIX):
        os.rename(
            _path(directory, base, suffix, CLEANED_SUFFIX),
            _path(directory, base, suffix, SWAP_SUFFIX),
        )
    fsync_dir(directory)
    os.rename(
        _path(directory, base, LOG_SUFFIX, CLEANED_SUFFIX),
        _path(directory, base, LOG_SUFFIX, SWAP_SUFFIX),
    )
    fsync_dir(directory)


def finish(directory: Path, base: int, *, sync: bool = True) -> None:
    """``.swap`` -> final names; the old files must already be out of the way.

    ``sync=False`` leaves the directory fsync to the caller (done outside the log's
    lock): a crash before it finds the swap staged or half-finished, both recoverable.
    """
    for suffix in _INDEXES:
        # Absent only when a crash fell inside an earlier finish(): already renamed.
        with contextlib.suppress(FileNotFoundError):
            os.replace(_path(directory, base, suffix, SWAP_SUFFIX), _path(directory, base, suffix))
    os.replace(_path(directory, base, LOG_SUFFIX, SWAP_SUFFIX), _path(directory, base, LOG_SUFFIX))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(directory, base, RANGE_SUFFIX, SWAP_SUFFIX))
    if sync:
        fsync_dir(directory)


def discard(directory: Path, base: int) -> None:
    """Drop a cleaned group that will not be swapped in."""
    for suffix in (*_SEGMENT_FILES, RANGE_SUFFIX):
        for stage_suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_path(directory, base, suffix, stage_suffix))


def _read_range(directory: Path, base: int) -> int | None:
    try:
        parts = _path(directory, base, RANGE_SUFFIX, SWAP_SUFFIX).read_text().split()
        if len(parts) == 2 and int(parts[0]) == base and int(parts[1]) > base:
            return int(parts[1])
    except (OSError, ValueError):
        pass
    return None


def recover(directory: Path) -> list[int]:
    """Complete every committed swap, drop every uncommitted one; returns the bases
    of the swaps completed."""
    names = os.listdir(directory)
    swaps = sorted(
        b
        for b in (parse_offset_file_name(n, LOG_SUFFIX + SWAP_SUFFIX) for n in names)
        if b is not None
    )
    bases = sorted(
        b for b in (parse_offset_file_name(n, LOG_SUFFIX) for n in names) if b is not None
    )
    done = []
    for base in swaps:
        end = _read_range(directory, base)
        if end is None:
            # The range file is renamed before the log file, so this is not our swap.
            log.warning("%s: swap file %d has no range; discarding it", directory, base)
            discard(directory, base)
            continue
        for old in bases:
            if base <= old < end:
                for suffix in _SEGMENT_FILES:
                    if (
                        old == base
                        and suffix in _INDEXES
                        and not _path(directory, base, suffix, SWAP_SUFFIX).exists()
                    ):
                        continue  # already the cleaned segment's (renamed by finish)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(_path(directory, old, suffix))
        finish(directory, base)
        log.info("%s: completed the swap of cleaned segment %d (up to %d)", directory, base, end)
        done.append(base)
    for name in os.listdir(directory):
        if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
    return done
