"""One compaction pass over one PartitionLog: plan, clean, stage, swap, record.

The broker's cleaner threads and the unit tests both drive passes through
``compact_log``; the rules live in cleaner.py, the file protocol in
segment_swap.py, and the bookkeeping under the log's lock in PartitionLog.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from . import segment_swap
from .cleaner import CleanerStats, Pace, clean
from .log import PartitionLog

# Called at "cleaned" (a group's .cleaned files are durable) and at "swap" (they
# were staged as .swap, the commit point): test hooks for crashing mid-swap.
StageHook = Callable[[str], None]


def _nothing(_: object) -> None:
    pass


def compact_log(
    log: PartitionLog,
    *,
    now_ms: int,
    dedupe_buffer_bytes: int,
    pace: Pace = _nothing,
    on_stage: StageHook = _nothing,
) -> CleanerStats | None:
    """Clean what is cleanable now; None if there was nothing to do or the log
    changed under the pass (its remaining groups are then left for the next one)."""
    plan = log.plan_cleaning(now_ms, dedupe_buffer_bytes=dedupe_buffer_bytes)
    if plan is None:
        return None
    stats = CleanerStats()
    completed = False
    try:
        for cleaned in clean(plan, stats, pace):
            on_stage("cleaned")
            segment_swap.stage(plan.directory, cleaned.base_offset)
            try:
                on_stage("swap")
                swapped = log.swap_cleaned(cleaned, now_ms=now_ms)
            except BaseException:
                # Not swapped in: unstage, so a restart does not complete it either.
                segment_swap.discard(plan.directory, cleaned.base_offset)
                raise
            if not swapped:
                segment_swap.discard(plan.directory, cleaned.base_offset)
                return None
        completed = True
        return stats
    finally:
        for seg in plan.segments:
            os.close(seg.fd)
        log.finish_cleaning(stats if completed else None)
