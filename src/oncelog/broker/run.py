"""Run a broker until SIGTERM/SIGINT; used by `oncelog broker` and test fixtures."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from oncelog.broker.broker import Broker
from oncelog.embedded import HTTP_READY

log = logging.getLogger(__name__)
SHUTDOWN_TIMEOUT_S = 5.0


async def serve(broker: Broker, *, announce: bool = True) -> None:
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
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


def run(broker: Broker) -> None:
    try:
        if (
            os.environ.get("ONCELOG_EVENT_LOOP") == "asyncio"
        ):  # for profilers that miss uvloop callbacks
            asyncio.run(serve(broker))
        else:
            import uvloop

            uvloop.run(serve(broker))
    except OSError as exc:
        print(
            f"error: cannot listen on {broker.listen[0]}:{broker.listen[1]}: {exc.strerror}",
            file=sys.stderr,
        )
        raise SystemExit(1) from exc
