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


def toggle_request_logging() -> bool:
    """Switch the per-request DEBUG log on or off (SIGUSR1); returns whether it is on."""
    requests = logging.getLogger(REQUESTS_LOGGER)
    on = not requests.isEnabledFor(logging.DEBUG)
    requests.setLevel(logging.DEBUG if on else logging.INFO)
    log.warning("per-request logging %s", "on" if on else "off")
    return on


async def serve(broker: Broker, *, announce: bool = True) -> None:
    await broker.start()
    # What start-up loaded (modules, kio's classes, topic and group state) lives as long
    # as the process: frozen, full collections stop walking it again and again.
    gc.collect()
    gc.freeze()
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
