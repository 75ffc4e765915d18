"""Run a broker until SIGTERM/SIGINT; used by `oncelog broker` and test fixtures."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys

from oncelog.broker.broker import Broker
from oncelog.broker.startup import StartupError, os_reason
from oncelog.embedded import HTTP_READY

log = logging.getLogger(__name__)
SHUTDOWN_TIMEOUT_S = 5.0
REQUESTS_LOGGER = "oncelog.broker.requests"


# Python's default (700, 10, 10) collects the young generation after every 700 net
# container allocations. Nearly all of the broker's objects die by reference counting, so
# those collections mostly walk live request state: in a 60 s protocol fuzz they were
# 8,930 young and 74 full collections (4.5 s of event-loop time, up to 85 ms each). With
# these thresholds the same run made 2 and 1 (docs/performance.md).
GC_THRESHOLDS = (50_000, 20, 100)
GC_THRESHOLD_ENV = "ONCELOG_GC_THRESHOLD"  # e.g. "700,10,10": Python's default


def gc_thresholds(text: str) -> tuple[int, ...]:
    if not text.strip():
        return GC_THRESHOLDS
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not 1 <= len(values) <= 3 or any(v < 0 for v in values):
        raise StartupError(
            f"{GC_THRESHOLD_ENV}={text!r}: expected one to three non-negative integers "
            "separated by commas, as gc.set_threshold takes (e.g. 50000,20,100)"
        )
    return values


def toggle_request_logging() -> bool:
    """Switch the per-request DEBUG log on or off (SIGUSR1); returns whether it is on."""
    requests = logging.getLogger(REQUESTS_LOGGER)
    on = not requests.isEnabledFor(logging.DEBUG)
    requests.setLevel(logging.DEBUG if on else logging.INFO)
    log.warning("per-request logging %s", "on" if on else "off")
    return on


async def serve(broker: Broker, *, announce: bool = True) -> None:
    thresholds = gc_thresholds(os.environ.get(GC_THRESHOLD_ENV, ""))
    # The thresholds apply from before the load: with Python's defaults, opening 20,000
    # partitions (~500,000 objects that live as long as the broker) ran ~1,100
    # collections, ~0.65 s of CPU, re-walking the growing set of partitions each time.
    gc.set_threshold(*thresholds)
    await broker.start()
    # What start-up loaded (modules, kio's classes, topic and group state) lives as long
    # as the process: frozen, full collections stop walking it again and again.
    gc.collect()
    gc.freeze()
    if not broker.groups.loaded:
        # The group coordinator loads __consumer_offsets in the background: freeze its
        # state too once loaded (a freeze without a collect: no full pass over it).
        broker.groups.on_loaded.append(gc.freeze)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, toggle_request_logging)
    if announce:
        if broker.http is not None:
            print(f"{HTTP_READY}{broker.http.url}", flush=True)
        print(broker.ready_line(), flush=True)
    await stop.wait()
    log.info("shutting down")
    try:
        await asyncio.wait_for(broker.stop(), SHUTDOWN_TIMEOUT_S)
    except TimeoutError:
        log.error("shutdown did not finish within %.0f s", SHUTDOWN_TIMEOUT_S)
        # Still close the logs cleanly (a no-op for those already closed), so the next
        # start need not recover them.
        broker.topics.close()


def run(broker: Broker) -> None:
    try:
        if (
            os.environ.get("ONCELOG_EVENT_LOOP") == "asyncio"
        ):  # for profilers that miss uvloop callbacks
            asyncio.run(serve(broker))
        else:
            import uvloop

            uvloop.run(serve(broker))
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
    except OSError as exc:  # loading the data directory
        where = f" {exc.filename}" if exc.filename else f" in {broker.data_dir}"
        print(f"error: cannot start the broker:{where}: {os_reason(exc)}", file=sys.stderr)
        raise SystemExit(1) from exc
