"""KIP-875 ``GET|PATCH|DELETE /connectors/{c}/offsets`` (Kafka Connect's
``ConnectorsResource`` offset endpoints). Bodies are parsed and shaped by
``runtime.connector_offsets``; changes need the connector STOPPED and a settled group,
and run on the leader."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.rest import views
from oncelog.connect.rest.forwarding import json_response, serve_or_forward
from oncelog.connect.rest.json_bodies import json_body
from oncelog.connect.rest.operations import ClusterView, ConnectOperations
from oncelog.connect.runtime.connector_offsets import (
    parse_sink_offsets,
    parse_source_offsets,
    source_offsets_json,
    success_message,
)
from oncelog.connect.runtime.plugins import PluginRegistry


class OffsetsResource:
    def __init__(
        self, view: ClusterView, plugins: PluginRegistry, operations: ConnectOperations | None
    ) -> None:
        self.view = view
        self.plugins = plugins
        self.ops = operations

    def _type(self, name: str) -> str | None:
        config = self.view.snapshot().connector_configs.get(name)
        if config is None:
            raise views.not_found(name)
        return self.plugins.connector_type(config)

    async def get(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["connector"]
        sink = self._type(name) == "sink"
        if self.ops is None:  # a read-only view (no herder)
            if sink:
                raise ConnectRestException(
                    501, "Reading sink connector offsets needs the worker's admin client"
                )
            offsets = self.view.offsets().connector_offsets(name)
            return web.json_response(source_offsets_json(offsets))
        ops = self.ops
        return await serve_or_forward(
            request, lambda: ops.connector_offsets(name), json_response(200)
        )

    async def alter(self, request: web.Request) -> web.StreamResponse:
        """``PATCH``: 200 with Kafka's success message."""
        name = request.match_info["connector"]
        body = await json_body(request)
        sink = self._type(name) == "sink"
        parsed: Any = parse_sink_offsets(body) if sink else parse_source_offsets(body)
        if sink and any(v is None for v in parsed.values()):
            raise ConnectRestException(
                400, "Resetting single sink partitions is not supported; use DELETE"
            )
        assert self.ops is not None
        ops = self.ops
        return await serve_or_forward(
            request,
            lambda: ops.alter_connector_offsets(name, parsed),
            lambda ok: web.json_response(success_message(reset=False, connector_confirmed=ok)),
        )

    async def reset(self, request: web.Request) -> web.StreamResponse:
        """``DELETE``: 200 with Kafka's success message."""
        name = request.match_info["connector"]
        self._type(name)
        assert self.ops is not None
        ops = self.ops
        return await serve_or_forward(
            request,
            lambda: ops.reset_connector_offsets(name),
            lambda ok: web.json_response(success_message(reset=True, connector_confirmed=ok)),
        )

    def register(self, app: web.Application) -> None:
        app.router.add_get("/connectors/{connector}/offsets", self.get)
        if self.ops is not None:
            app.router.add_patch("/connectors/{connector}/offsets", self.alter)
            app.router.add_delete("/connectors/{connector}/offsets", self.reset)
