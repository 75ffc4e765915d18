"""``/admin/loggers`` (KIP-495, KIP-976), as Kafka Connect's ``LoggingResource``:

- ``GET /admin/loggers``: the root logger and every logger with a level set;
- ``GET /admin/loggers/{name}``: its level (404 ``Logger NAME not found.``);
- ``PUT /admin/loggers/{name}`` with ``{"level": "DEBUG"}``: sets it on this worker
  (``scope=worker``, the default; 200 with the loggers touched) or on every worker
  (``scope=cluster``: written to the config topic, 204). No ``level`` is 400; an
  unknown level is 404 (``invalid log level 'X'.``), as in Kafka; an unknown scope
  falls back to ``worker``.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.rest.json_bodies import json_body
from oncelog.connect.rest.operations import ConnectOperations
from oncelog.connect.runtime.loggers import Loggers, level_name, parse_level

log = logging.getLogger(__name__)


class LoggersResource:
    def __init__(self, loggers: Loggers, operations: ConnectOperations | None) -> None:
        self.loggers = loggers
        self.ops = operations

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response(self.loggers.all_levels())

    async def get(self, request: web.Request) -> web.Response:
        name = request.match_info["logger"]
        level = self.loggers.level(name)
        if level is None:
            raise ConnectRestException(404, f"Logger {name} not found.")
        return web.json_response(level)

    async def put(self, request: web.Request) -> web.Response:
        name = request.match_info["logger"]
        body = await json_body(request)
        requested = body.get("level") if isinstance(body, dict) else None
        if not isinstance(requested, str):
            raise ConnectRestException(
                400, "Desired 'level' parameter was not specified in request."
            )
        level = parse_level(requested)
        if level is None:
            raise ConnectRestException(404, f"invalid log level '{requested}'.")
        scope = request.query.get("scope", "worker").lower()
        if scope == "cluster" and self.ops is not None:
            await asyncio.to_thread(self.ops.set_cluster_logger_level, name, level_name(level))
            return web.Response(status=204)
        if scope != "worker":
            log.warning("invalid logging scope %r; using worker", scope)
        log.info("setting the level of %s and the loggers below it to %s", name, requested)
        return web.json_response(self.loggers.set_level(name, level))

    def register(self, app: web.Application) -> None:
        app.router.add_get("/admin/loggers", self.list)
        app.router.add_get("/admin/loggers/{logger}", self.get)
        app.router.add_put("/admin/loggers/{logger}", self.put)
