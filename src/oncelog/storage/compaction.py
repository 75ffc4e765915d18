"""One compaction pass over one UnifiedLog: plan, clean, stage, swap, record.

The broker's cleaner threads and the unit tests both drive passes through
``compact_log``; the rules live in cleaner.py, the file protocol in
segment_swap.py, and the bookkeeping under the log's lock in UnifiedLog.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator

from . import segment_swap
from .cleaner import CleanedSegment, CleanerStats, CleaningPlan, Pace, clean
from .fsutil import fsync_dir
from .unified_log import UnifiedLog

# Called at "cleaned" (a group's .cleaned files are durable) and at "swap" (they
# were staged as .swap, the commit point): test hooks for crashing mid-swap.
StageHook = Callable[[str], None]
Runner = Callable[[CleaningPlan, CleanerStats, Pace], Generator[CleanedSegment, None, None]]


def _nothing(_: object) -> None:
    pass


def compact_log(
    log: UnifiedLog,
    *,
    now_ms: int,
    dedupe_buffer_bytes: int,
    pace: Pace = _nothing,
    on_stage: StageHook = _nothing,
    run: Runner = clean,
) -> CleanerStats | None:
    """Clean what is cleanable now; None if there was nothing to do or the log
    changed under the pass (its remaining groups are then left for the next one).

    ``run`` performs the pass: ``cleaner.clean`` in this thread, or
    ``CleanerProcess.run`` in a child process.
    """
    # On the cleaner's thread: let the segments rolled last become cleanable (a plan
    # stops below a segment whose roll flush still runs).
    log.wait_for_roll_flush(check=False)
    plan = log.plan_cleaning(now_ms, dedupe_buffer_bytes=dedupe_buffer_bytes)
    if plan is None:
        return None
    stats = CleanerStats()
    completed = False
    passes = run(plan, stats, pace)
    try:
        for cleaned in passes:
            try:
                on_stage("cleaned")
                segment_swap.stage(plan.directory, cleaned.base_offset)
                on_stage("swap")
                swapped = log.swap_cleaned(cleaned, now_ms=now_ms)
            except BaseException:
                # Not swapped in: drop it, so a restart does not complete it either.
                segment_swap.discard(plan.directory, cleaned.base_offset)
                raise
            if not swapped:
                segment_swap.discard(plan.directory, cleaned.base_offset)
                return None
            fsync_dir(plan.directory)  # the final renames, outside the log's lock
        completed = True
        return stats
    finally:
        passes.close()  # stops a pass left early (a process runner waits for this)
        for seg in plan.segments:
            os.close(seg.fd)
        log.finish_cleaning(stats if completed else None)
