"""The broker's HTTP listener (``metrics.listener``): Prometheus metrics and the web console.

An aiohttp app on the broker's own event loop. Routes:

- ``GET /metrics``: Prometheus text format, or OpenMetrics when the scraper asks for it;
- ``GET /``: the console page; ``GET /console/<panel>``: its panels, polled by htmx;
- ``POST /console/abort``: abort a hanging transaction. 403 unless ``console.allow.abort``
  is true; then it must carry htmx's ``HX-Request`` header and the listener's per-start
  token, which only the console page it served holds (a cross-site form post can set
  neither), and come from no other origin.

Every request must name, in its ``Host`` header, the listener's own host, a loopback
name, this machine's names or one of ``metrics.listener.allowed.hosts``: a web page on a
rebinding domain that resolves to this address cannot read the metrics or the console.

With ``metrics.listener.authentication=basic`` every request must also carry HTTP basic
credentials of a user the broker's SASL listeners accept (401 otherwise); the listener
speaks plain HTTP only, so keep it on loopback or behind a TLS proxy. The caller's
principal (``User:ANONYMOUS`` without authentication) is then authorized as on the Kafka
port: with ``authorizer.class.name`` set, /metrics and the console show only what it may
describe, and the abort action needs what ``oncelog transactions abort`` needs (see
``access``).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import socket
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from oncelog.broker.config import BrokerConfigError
from oncelog.broker.http import console
from oncelog.broker.http.access import (
    Scope,
    ScopedView,
    abort_refusal,
    scoped_snapshot,
)
from oncelog.broker.metrics import (
    TEXT_CONTENT_TYPE,
    BrokerCollector,
    encode_text,
    families,
    metrics_registry,
)
from oncelog.broker.startup import ListenError, listen_socket
from oncelog.broker.state_view import BrokerStateView
from oncelog.security.http_basic import basic_credentials
from oncelog.security.principal import ANONYMOUS
from oncelog.security.sasl import SaslAuthenticationError

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

log = logging.getLogger(__name__)

SAMPLE_EVERY_S = 1.0  # the console chart's resolution
# The chart is sampled only while a console is open (its panels poll every 2 s): no cost
# when nobody looks.
WATCHED_FOR_S = 30.0


def parse_http_listener(url: str) -> tuple[str, int]:
    """``http://HOST:PORT`` (port 0: any free port) -> (host, port)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
        raise BrokerConfigError(f"metrics.listener: expected http://HOST:PORT, got {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise BrokerConfigError(f"metrics.listener: invalid port in {url!r}") from exc
    if port is None:
        raise BrokerConfigError(f"metrics.listener: a port is required in {url!r}")
    return parts.hostname, port


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
TOKEN_HEADER = "X-Oncelog-Token"
CHALLENGE = {"WWW-Authenticate": 'Basic realm="oncelog"'}
SCOPE = web.RequestKey("scope", Scope)  # the request's caller, set by the auth middleware


class HttpListener:
    def __init__(
        self,
        broker: Broker,
        view: BrokerStateView,
        url: str,
        *,
        allow_abort: bool,
        allowed_hosts: str = "",
    ):
        self.host, self.port = parse_http_listener(url)
        self.allowed_hosts = {
            self.host.lower(),
            *LOOPBACK_NAMES,
            socket.gethostname().lower(),
            socket.getfqdn().lower(),
            *(h.strip().lower() for h in allowed_hosts.split(",") if h.strip()),
        }
        self.token = secrets.token_urlsafe(24)  # per start: the console's CSRF token
        self._broker = broker
        self._view = view
        self._allow_abort = allow_abort
        self._basic = broker.config.settings.metrics_listener_authentication == "basic"
        # Who may log in: the (listener, mechanism) pairs of the SASL listeners.
        self._mechanisms = broker.authentication.password_mechanisms(
            x.name for x in broker.listeners if x.protocol.uses_sasl
        )
        if self._basic and not self._mechanisms:
            raise BrokerConfigError(
                "metrics.listener.authentication=basic checks the users of the broker's SASL "
                "listeners, and there is none: add a SASL_PLAINTEXT or SASL_SSL listener "
                "offering PLAIN or SCRAM"
            )
        if self._basic and self.host.lower() not in LOOPBACK_NAMES:
            log.warning(
                "metrics.listener %s takes basic authentication over plain HTTP: passwords "
                "cross the network in clear; keep it on loopback or behind a TLS proxy",
                url,
            )
        self._collector = BrokerCollector(broker, view)
        self._history = console.LagHistory(view)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._last_viewed = float("-inf")  # loop time of the latest console request

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._host_guard, self._authenticate])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/", self._page)
        app.router.add_get("/static/htmx.min.js", self._htmx)
        panels: dict[str, Callable[[Scope], str]] = {
            "partitions": lambda scope: console.partitions_table(self._view_for(scope)),
            "transactions": lambda scope: console.transactions_table(self._view_for(scope)),
            "hanging": lambda scope: console.hanging_table(
                self._view_for(scope), self._allow_abort
            ),
            "groups": lambda scope: console.groups_table(self._view_for(scope)),
            "chart": lambda scope: console.chart(self._history, self._topic_filter(scope)),
        }
        for name, render in panels.items():
            app.router.add_get(f"/console/{name}", self._panel(render))
        app.router.add_post("/console/abort", self._abort)
        return app

    def bind(self) -> socket.socket:
        """The listening socket, bound before the broker touches its data directory."""
        try:
            sock = listen_socket(self.host, self.port, backlog=128)
        except OSError as exc:
            raise ListenError("metrics.listener", self.host, self.port, exc) from exc
        self.port = sock.getsockname()[1]  # port 0: the bound one
        return sock

    async def start(self, sock: socket.socket) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        self._sampler = asyncio.create_task(self._sample())

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if loop.time() - self._last_viewed < WATCHED_FOR_S:
                try:
                    self._history.sample()
                except Exception:
                    log.exception("sampling the LSO lag failed")
            await asyncio.sleep(SAMPLE_EVERY_S)

    def _viewed(self) -> None:
        self._last_viewed = asyncio.get_running_loop().time()

    # -- handlers ------------------------------------------------------------------------

    @web.middleware
    async def _host_guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        host = _hostname(request.host)
        if host not in self.allowed_hosts:
            return _text(
                403,
                f"Host {host!r} is not one this listener answers to: add it to "
                "metrics.listener.allowed.hosts",
            )
        origin = request.headers.get("Origin")
        if request.method != "GET" and origin is not None:
            if _hostname(urlsplit(origin).netloc) not in self.allowed_hosts:
                return _text(403, f"cross-origin request from {origin} refused")
        return await handler(request)

    @web.middleware
    async def _authenticate(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """The caller's principal: ANONYMOUS, or with basic authentication the user its
        credentials log in as on the Kafka port (Kafka Connect's JaasBasicAuthFilter answers
        401 likewise)."""
        principal = ANONYMOUS
        if self._basic:
            credentials = basic_credentials(request.headers.get("Authorization"))
            if credentials is None:
                return _text(401, "authentication required (HTTP basic)", CHALLENGE)
            user, password = credentials
            try:
                # A SCRAM login derives the salted password (PBKDF2): off the event loop.
                principal = await asyncio.to_thread(
                    self._broker.authentication.check_password, self._mechanisms, user, password
                )
            except SaslAuthenticationError as exc:
                # Counted and logged as the Kafka port's failures are (once per window),
                # and answered after connection.failed.authentication.delay.ms.
                broker = self._broker
                broker.stats.failed_authentications += 1
                broker.client_faults.note(
                    "failed authentications", logging.INFO,
                    "Failed authentication with %s (HTTP basic, metrics.listener): %s",
                    request.remote, exc,
                )  # fmt: skip
                await asyncio.sleep(broker.failed_authentication_delay_s)
                return _text(401, "invalid user name or password", CHALLENGE)
        request[SCOPE] = Scope(self._broker.authorizer, principal, request.remote or "")
        return await handler(request)

    def _view_for(self, scope: Scope) -> console.StateSource:
        return self._view if scope.everything else ScopedView(self._view, scope)

    def _topic_filter(self, scope: Scope) -> Callable[[str], bool] | None:
        return None if scope.everything else ScopedView(self._view, scope).topic_visible

    async def _metrics(self, request: web.Request) -> web.Response:
        # State is copied on the loop; the families and their text are built in a thread.
        snap = self._collector.snapshot()
        scope = request[SCOPE]
        if not scope.everything:
            snap = scoped_snapshot(snap, scope)  # on the loop: the ACLs may change
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        if content_type.startswith("text/plain"):
            body = await asyncio.to_thread(lambda: encode_text(families(snap)))
            content_type = TEXT_CONTENT_TYPE
        else:  # OpenMetrics: prometheus_client's encoder
            body = await asyncio.to_thread(encoder, metrics_registry(snap))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _page(self, request: web.Request) -> web.Response:
        if not self._history.samples:
            self._history.sample()  # the chart's first point
        self._viewed()
        scope = request[SCOPE]
        text = console.page(
            self._view_for(scope),
            self._history,
            self._broker.ready_line(),
            self._allow_abort,
            self.token,
            self._topic_filter(scope),
        )
        return web.Response(text=text, content_type="text/html")

    async def _htmx(self, request: web.Request) -> web.Response:
        data = resources.files("oncelog.broker.http").joinpath("static/htmx.min.js").read_bytes()
        return web.Response(
            body=data,
            content_type="application/javascript",
            headers={"Cache-Control": "max-age=3600"},
        )

    def _panel(
        self, render: Callable[[Scope], str]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            self._viewed()
            return web.Response(text=render(request[SCOPE]), content_type="text/html")

        return handler

    async def _abort(self, request: web.Request) -> web.Response:
        if not self._allow_abort:
            return _text(403, "abort is disabled: start the broker with console.allow.abort=true")
        if request.headers.get("HX-Request") != "true":
            return _text(403, "abort must come from the console page (HX-Request header)")
        if not hmac.compare_digest(request.headers.get(TOKEN_HEADER, ""), self.token):
            return _text(403, "abort must come from the console page (its token is missing)")
        form = await request.post()
        try:
            topic = str(form["topic"])
            partition = int(str(form["partition"]))
            producer_id = int(str(form["producer_id"]))
        except (KeyError, ValueError):
            return _text(400, "expected form fields topic, partition and producer_id")
        scope = request[SCOPE]
        if not scope.everything:
            target = next(
                (
                    h
                    for h in self._view.hanging()
                    if (h.topic, h.partition, h.producer_id) == (topic, partition, producer_id)
                ),
                None,
            )
            # No await between this check and the abort's own lookup: the same target.
            refusal = abort_refusal(scope.check, scope.principal, topic, target)
            if refusal is not None:
                return _text(403, refusal)
        outcome = await self._view.abort(topic, partition, producer_id)
        log.warning(
            "console abort of producer %d in %s-%d by %s: %s",
            producer_id,
            topic,
            partition,
            scope.principal,
            outcome.message,
        )
        return _text(200 if outcome.ok else 409, outcome.message)


def _hostname(host: str) -> str:
    """The host part of a ``Host`` header or an origin's netloc, without the port."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _text(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=message, headers=headers)
