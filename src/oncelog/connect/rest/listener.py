"""The REST listener's socket, its TLS, and the URL other workers reach this one at
(``listeners``, ``rest.advertised.host.name``, ``rest.advertised.port``,
``rest.advertised.listener``)."""

from __future__ import annotations

import ipaddress
import logging
import socket
from urllib.parse import urlsplit

from aiohttp import web

from oncelog.connect.runtime.rest_security import RestSecurity
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)

log = logging.getLogger(__name__)


def bind(listener: str) -> socket.socket:
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
    adv_host = config.settings.rest_advertised_host or (
        socket.gethostname() if host in ("", "0.0.0.0", "::") else host
    )
    adv_port = config.settings.rest_advertised_port or port
    scheme = (config.settings.rest_advertised_listener or "").lower() or urlsplit(
        config.listener_urls()[0]
    ).scheme.lower()
    return f"{scheme}://{adv_host}:{adv_port}/"


def warn_if_exposed(host: str, security: RestSecurity) -> None:
    """A REST API reachable from other hosts runs whatever connectors its callers
    configure: say so once at start when it has no authentication."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and security.authenticator is None:
        log.warning(
            "the REST API listens on %s, reachable from other hosts, without authentication: "
            "anyone who can connect can create connectors. Bind it to 127.0.0.1 (the "
            "default), set rest.basic.auth.credentials.file, or restrict access to it",
            host,
        )


async def start_site(
    app: web.Application, sock: socket.socket, security: RestSecurity
) -> web.AppRunner:
    """Serve ``app`` on ``sock``, over TLS on an https listener."""
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock, ssl_context=security.server_ssl).start()
    return runner
