"""The ``oncelog connect worker`` process: creates the internal topics, serves the
REST API, runs the herder, announces readiness and stops on SIGTERM/SIGINT.

Order of start-up, as in Kafka:

1. the internal topics are created when missing (compacted, Kafka's partition
   counts) and refused when not compacted;
2. the REST listener binds (port 0 picks a free port); it also serves Prometheus metrics
   at ``/metrics`` (docs/metrics.md);
3. the herder reads the internal topics and joins the group;
4. one line ``oncelog connect worker ready on http://HOST:PORT`` is printed.

On SIGTERM the herder stops tasks (each within ``task.shutdown.graceful.timeout.ms``)
and leaves the group, then the listener closes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from aiohttp import web

from oncelog.connect.distributed.herder import Herder
from oncelog.connect.kafka_io.internal_topics import InternalTopicAdmin
from oncelog.connect.kafka_io.settings import check_worker_client_settings, check_worker_connection
from oncelog.connect.rest.app import create_app
from oncelog.connect.rest.herder_resource import HerderResource
from oncelog.connect.rest.metrics import add_metrics_route
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.worker_config import (
    EXACTLY_ONCE_SOURCE_SUPPORT,
    REST_ADVERTISED_HOST,
    REST_ADVERTISED_PORT,
    TASK_SHUTDOWN_TIMEOUT_MS,
    WorkerConfig,
)

log = logging.getLogger(__name__)
READY = "oncelog connect worker ready on http://{host}:{port}"
# How long a starting worker waits for an unreachable cluster (a refused TLS/SASL handshake
# fails at once).
REACH_TIMEOUT_S = 30.0


def _bind(listener: str) -> socket.socket:
    parts = urlsplit(listener)
    host = parts.hostname or "0.0.0.0"
    port = parts.port if parts.port is not None else 8083
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def advertised_url(config: WorkerConfig, host: str, port: int) -> str:
    adv_host = config.get(REST_ADVERTISED_HOST) or (
        socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    )
    adv_port = config.get(REST_ADVERTISED_PORT) or port
    return f"http://{adv_host}:{adv_port}/"


async def serve(config: WorkerConfig, announce: Callable[[str], None]) -> None:
    check_worker_client_settings(config)
    await asyncio.to_thread(check_worker_connection, config, REACH_TIMEOUT_S)
    plugins = PluginRegistry.discover(config.plugin_path())
    admin_config = {**config.shared_client_config(), **config.originals_with_prefix("admin.")}
    admin_config.pop("listeners", None)
    await asyncio.to_thread(InternalTopicAdmin(admin_config).ensure, config.internal_topics())
    sock = _bind(config.listener_urls()[0])
    host, port = sock.getsockname()[:2]
    herder = Herder(config, plugins, advertised_url(config, host, port))
    resource = HerderResource(herder, plugins, config.override_policy())
    app = create_app(
        plugins,
        override_policy=config.override_policy(),
        exactly_once_source=str(config.get(EXACTLY_ONCE_SOURCE_SUPPORT)),
        view=herder.state,
        herder_routes=resource.register,
    )
    add_metrics_route(app, herder.worker, herder.state)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    herder.start()
    try:
        while not herder.joined.is_set():
            if stop.is_set() or herder.stopped.is_set():
                return
            await asyncio.sleep(0.05)
        announce(READY.format(host=host, port=port))
        while not stop.is_set() and not herder.stopped.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass
    finally:
        log.info("stopping the worker")
        grace_s = config.get_int(TASK_SHUTDOWN_TIMEOUT_MS) / 1000
        await asyncio.to_thread(herder.stop, grace_s * 4 + 10)
        await runner.cleanup()


def run_worker(config: WorkerConfig, announce: Callable[[str], None]) -> None:
    asyncio.run(serve(config, announce))
