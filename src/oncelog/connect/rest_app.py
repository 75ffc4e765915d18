"""The worker's REST API (aiohttp): Kafka Connect's paths, bodies, status codes and
error format ``{"error_code": …, "message": …}``.

This slice serves what needs no herder: the plugin endpoints (KIP-769) and the
OpenAPI description. The connector endpoints join once the herder exists; their
bodies are already built by ``rest_views`` and ``offsets_api``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from oncelog.connect.config import convert_to_string
from oncelog.connect.connector_config import validate_connector_config
from oncelog.connect.errors import ConfigException, ConnectRestException
from oncelog.connect.plugins import PluginRegistry
from oncelog.connect.version import VERSION

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error, including unknown paths and methods, in Kafka's JSON error format."""
    try:
        return await handler(request)
    except ConnectRestException as exc:
        return error_response(exc.status, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, f"HTTP {exc.status} {exc.reason}")


async def json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConnectRestException(400, f"Malformed JSON: {exc}") from None


class PluginResource:
    def __init__(self, plugins: PluginRegistry, override_policy: str) -> None:
        self.plugins = plugins
        self.override_policy = override_policy

    async def list(self, request: web.Request) -> web.Response:
        """``GET /connector-plugins[?connectorsOnly=false]``."""
        connectors_only = request.query.get("connectorsOnly", "true").lower() != "false"
        if connectors_only:
            return web.json_response(self.plugins.connector_plugins())
        return web.json_response(
            [
                {"class": d.class_name, "type": d.type.value, "version": d.version()}
                for d in self.plugins.plugins()
            ]
        )

    def _plugin(self, name: str) -> type:
        try:
            return self.plugins.resolve(name)
        except ConfigException:
            raise ConnectRestException(404, f"Unknown plugin {name}.") from None

    async def config(self, request: web.Request) -> web.Response:
        """``GET /connector-plugins/{plugin}/config``: the plugin's own keys."""
        plugin_cls = self._plugin(request.match_info["plugin"])
        definition = plugin_cls().config_def()
        return web.json_response(
            [
                {
                    "name": key.name,
                    "type": key.type.value,
                    "required": not key.has_default,
                    "default_value": convert_to_string(key.default, key.type)
                    if key.has_default
                    else None,
                    "importance": key.importance.value,
                    "documentation": key.documentation,
                    "group": key.group,
                    "width": key.width.value,
                    "display_name": key.display_name,
                    "dependents": list(key.dependents),
                    "order": key.order_in_group,
                }
                for key in definition.keys()
            ]
        )

    async def validate(self, request: web.Request) -> web.Response:
        """``PUT /connector-plugins/{plugin}/config/validate``."""
        plugin = request.match_info["plugin"]
        body = await json_body(request)
        if not isinstance(body, dict) or not all(isinstance(v, str) for v in body.values()):
            raise ConnectRestException(
                400, "Connector configuration must be a JSON object of string values"
            )
        requested = self._plugin(plugin)
        included = body.get("connector.class")
        if included is not None:
            try:
                included_cls = self.plugins.resolve(included)
            except ConfigException as exc:
                raise ConnectRestException(400, str(exc)) from None
            if included_cls is not requested:
                raise ConnectRestException(
                    400, f"Included connector type {included} does not match request type {plugin}"
                )
        config = {**body, "connector.class": included or plugin}
        try:
            result = validate_connector_config(config, self.plugins, self.override_policy)
        except ConfigException as exc:
            raise ConnectRestException(400, str(exc)) from None
        return web.json_response(result)


def openapi() -> dict[str, Any]:
    """The OpenAPI description of the public endpoints served so far."""
    error = {"$ref": "#/components/schemas/Error"}

    def responses(ok: str, *codes: int) -> dict[str, Any]:
        out: dict[str, Any] = {"200": {"description": ok}}
        for code in codes:
            out[str(code)] = {
                "description": "error",
                "content": {"application/json": {"schema": error}},
            }
        return out

    plugin = {"name": "plugin", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "oncelog Connect REST API", "version": VERSION},
        "paths": {
            "/connector-plugins": {
                "get": {
                    "summary": "List installed plugins (connectors only unless connectorsOnly=false)",
                    "parameters": [
                        {"name": "connectorsOnly", "in": "query", "schema": {"type": "boolean"}}
                    ],
                    "responses": responses("plugins"),
                }
            },
            "/connector-plugins/{plugin}/config": {
                "get": {
                    "summary": "The plugin's configuration keys",
                    "parameters": [plugin],
                    "responses": responses("keys", 404),
                }
            },
            "/connector-plugins/{plugin}/config/validate": {
                "put": {
                    "summary": "Validate a connector configuration (ConfigInfos with error_count and per-field errors)",
                    "parameters": [plugin],
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                }
                            }
                        }
                    },
                    "responses": responses("validation result", 400, 404),
                }
            },
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error_code": {"type": "integer"},
                        "message": {"type": "string"},
                    },
                }
            }
        },
    }


def create_app(plugins: PluginRegistry, *, override_policy: str = "All") -> web.Application:
    app = web.Application(middlewares=[errors_as_json])
    resource = PluginResource(plugins, override_policy)
    app.router.add_get("/connector-plugins", resource.list)
    app.router.add_get("/connector-plugins/{plugin}/config", resource.config)
    app.router.add_put("/connector-plugins/{plugin}/config/validate", resource.validate)

    async def openapi_json(request: web.Request) -> web.Response:
        return web.json_response(openapi())

    app.router.add_get("/openapi.json", openapi_json)
    return app
