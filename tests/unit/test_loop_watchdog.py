"""The event-loop watchdog: a held loop is reported with the stack that holds it."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest

from oncelog.broker.loop_watchdog import LAG_BUCKETS_S, LoopWatchdog, kernel_wait


def _hold_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a stand-in for any synchronous work on the loop


def test_a_held_loop_is_logged_with_its_stack_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> LoopWatchdog:
        dog = LoopWatchdog(warn_after_s=0.2)
        dog.start()
        try:
            await asyncio.sleep(0.3)  # calm beats first
            _hold_the_loop_for(0.6)
            await asyncio.sleep(0.2)  # the loop turns again: the stall is over
        finally:
            dog.stop()
        return dog

    with caplog.at_level(logging.WARNING, logger="oncelog.broker.loop_watchdog"):
        dog = asyncio.run(main())
    held = [r.getMessage() for r in caplog.records if "so far" in r.getMessage()]
    over = [r.getMessage() for r in caplog.records if "stall over" in r.getMessage()]
    assert len(held) == 1, caplog.text
    assert "_hold_the_loop_for" in held[0] and "time.sleep(seconds)" in held[0]
    # And where the thread waits in the kernel: asleep (S) in the sleep's system call.
    assert "kernel: state S, waiting in " in held[0]
    assert len(over) == 1
    assert dog.figures.stalls == 1
    assert dog.figures.max_lag_s >= 0.5
    # The one late beat landed in the (0.5, 1.0] bucket; the calm ones in the first.
    assert dog.figures.lag_counts[LAG_BUCKETS_S.index(1.0)] == 1
    assert dog.figures.lag_counts[0] >= 3


def test_garbage_collections_are_counted_and_timed() -> None:
    async def main() -> LoopWatchdog:
        dog = LoopWatchdog(warn_after_s=0)  # figures only, no thread
        dog.start()
        gc.collect()
        gc.collect(0)
        dog.stop()
        return dog

    dog = asyncio.run(main())
    assert dog.figures.gc.collections[2] >= 1
    assert dog.figures.gc.collections[0] >= 1
    assert dog.figures.gc.pause_s[2] > 0
    assert dog.figures.stalls == 0


def test_gc_thresholds_default_override_and_typo() -> None:
    from oncelog.broker.run import GC_THRESHOLDS, gc_thresholds
    from oncelog.broker.startup import StartupError

    assert gc_thresholds("") == GC_THRESHOLDS
    assert gc_thresholds("700,10,10") == (700, 10, 10)
    assert gc_thresholds("1000") == (1000,)
    for bad in ("70O,10", "1,2,3,4", "-1", ","):
        with pytest.raises(StartupError, match="ONCELOG_GC_THRESHOLD"):
            gc_thresholds(bad)


def test_kernel_wait_of_a_thread_that_is_gone_is_empty() -> None:
    assert kernel_wait(2**30) == ""  # no such task: nothing to add to the report
