"""The worker's REST API (aiohttp): Kafka Connect's paths, bodies, status codes and
error format ``{"error_code": …, "message": …}``.

This slice serves what needs no herder:

- the plugin endpoints (KIP-769);
- the read-only connector endpoints, from a :class:`ClusterView` (the worker's view of
  the config, status and offsets topics);
- the OpenAPI description.

The endpoints that change state join once the herder exists.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from oncelog.connect.api.config import convert_to_string
from oncelog.connect.api.errors import ConfigException, ConnectException, ConnectRestException
from oncelog.connect.api.version import COMMIT, VERSION
from oncelog.connect.rest.connectors_resource import ConnectorsResource
from oncelog.connect.rest.forwarding import CLIENT_SSL
from oncelog.connect.rest.internal_resource import InternalResource
from oncelog.connect.rest.json_bodies import json_body
from oncelog.connect.rest.loggers_resource import LoggersResource
from oncelog.connect.rest.offsets_resource import OffsetsResource
from oncelog.connect.rest.operations import ClusterView, ConnectOperations
from oncelog.connect.runtime.connector_validation import validate_connector_config
from oncelog.connect.runtime.loggers import Loggers
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.rest_security import BasicAuthenticator

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
log = logging.getLogger(__name__)


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
    except ConnectException as exc:
        # Kafka answers 500 with the message for failures it does not classify.
        return error_response(500, str(exc))


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def request_guard(allowed_origins: str) -> Callable[..., Any]:
    """Refuses what a web page could send on a developer's behalf: a body that is not
    JSON (415, as Kafka's JAX-RS resources answer; a ``text/plain`` form post needs no
    CORS preflight) and a request from another origin than the API's own unless
    ``access.control.allow.origin`` lists it (403)."""
    allowed = {o.strip() for o in allowed_origins.split(",") if o.strip()}

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if (
            origin is not None
            and "*" not in allowed
            and origin not in allowed
            and origin != f"{request.scheme}://{request.host}"
        ):
            return error_response(
                403,
                f"Cross-origin request from {origin} refused: list the origin in "
                "access.control.allow.origin to allow it",
            )
        if request.method in BODY_METHODS and request.body_exists:
            if request.content_type != "application/json":
                return error_response(415, "HTTP 415 Unsupported Media Type")
        return await handler(request)

    return guard


# The internal endpoints, exempt from basic authentication as in Kafka's
# JaasBasicAuthFilter: workers call them with no user's credentials, and under the
# sessioned protocol the handlers verify their signature instead.
_INTERNAL_PATH = re.compile(r"/?connectors/[^/]+/(tasks|fence)/?")


def basic_auth(authenticator: BasicAuthenticator) -> Callable[..., Any]:
    """HTTP basic authentication on every request but the internal ones (Kafka's
    ``JaasBasicAuthFilter``): 401 without valid credentials."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "PUT" and _INTERNAL_PATH.fullmatch(request.path):
            return await handler(request)
        user = authenticator.authenticate(request.headers.get("Authorization"))
        if user is None:
            # Debug only, as Kafka: a mistyped password should not flood the log.
            log.debug("REST request %s %s failed authentication", request.method, request.path)
            return error_response(401, "User cannot access the resource.")
        return await handler(request)

    return authenticate


class PluginResource:
    def __init__(
        self, plugins: PluginRegistry, override_policy: str, exactly_once_source: str = "disabled"
    ) -> None:
        self.plugins = plugins
        self.override_policy = override_policy
        self.exactly_once_source = exactly_once_source

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
            result = validate_connector_config(
                config, self.plugins, self.override_policy, self.exactly_once_source
            )
        except ConfigException as exc:
            raise ConnectRestException(400, str(exc)) from None
        return web.json_response(result)


def openapi(connectors: bool = True, herder: bool = False) -> dict[str, Any]:
    """The OpenAPI description of the public endpoints served (``connectors``: with
    the ``/connectors`` endpoints; ``herder``: with those that change the cluster)."""
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
    connector = {"name": "connector", "in": "path", "required": True, "schema": {"type": "string"}}
    task = {"name": "task", "in": "path", "required": True, "schema": {"type": "integer"}}
    spec: dict[str, Any] = {
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
            **{
                path: {
                    "get": {
                        "summary": summary,
                        "parameters": params,
                        "responses": responses(summary, 404),
                    }
                }
                for path, summary, params in (
                    ("/connectors/{connector}", "Connector info: config, tasks, type", [connector]),
                    (
                        "/connectors/{connector}/config",
                        "The connector's configuration",
                        [connector],
                    ),
                    (
                        "/connectors/{connector}/tasks",
                        "The connector's task configurations",
                        [connector],
                    ),
                    ("/connectors/{connector}/status", "Connector and task states", [connector]),
                    (
                        "/connectors/{connector}/tasks/{task}/status",
                        "One task's state",
                        [connector, task],
                    ),
                    (
                        "/connectors/{connector}/topics",
                        "Topics the connector used (KIP-558)",
                        [connector],
                    ),
                    ("/connectors/{connector}/offsets", "Source offsets (KIP-875)", [connector]),
                )
            },
            "/connectors": {
                "get": {
                    "summary": "Connector names, or details with expand=status and/or expand=info",
                    "parameters": [
                        {
                            "name": "expand",
                            "in": "query",
                            "schema": {"type": "string", "enum": ["status", "info"]},
                        }
                    ],
                    "responses": responses("connectors"),
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
    if not connectors:
        spec["paths"] = {p: v for p, v in spec["paths"].items() if not p.startswith("/connectors")}
    if herder:
        json_object = {
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
        flags = [
            {"name": n, "in": "query", "schema": {"type": "boolean"}}
            for n in ("includeTasks", "onlyFailed")
        ]
        for path, method, summary, params, ok, codes, body in (
            ("/", "get", "Version information", [], "200", (), False),
            ("/health", "get", "Worker health", [], "200", (503,), False),
            ("/connectors", "post", "Create a connector ({name, config[, initial_state]})", [], "201", (400, 409), True),
            ("/connectors/{connector}/config", "put", "Create or replace a connector's config", [connector], "200", (400, 409), True),
            ("/connectors/{connector}/config", "patch", "Change some keys (null removes)", [connector], "200", (400, 404, 409), True),
            ("/connectors/{connector}/pause", "put", "Pause the connector and its tasks", [connector], "202", (404, 409), False),
            ("/connectors/{connector}/resume", "put", "Resume the connector and its tasks", [connector], "202", (404, 409), False),
            ("/connectors/{connector}/stop", "put", "Stop the connector and shut its tasks down", [connector], "204", (404, 409), False),
            ("/connectors/{connector}/restart", "post", "Restart the connector (KIP-745 flags)", [connector, *flags], "202", (404, 409), False),
            ("/connectors/{connector}/tasks/{task}/restart", "post", "Restart one task", [connector, task], "204", (404, 409), False),
            ("/connectors/{connector}/tasks/{task}/metrics", "get", "A running task's metrics (KIP-618 transaction sizes)", [connector, task], "200", (404,), False),
            ("/connectors/{connector}", "delete", "Delete the connector", [connector], "204", (404, 409), False),
            ("/connectors/{connector}/offsets", "patch", "Alter offsets of a STOPPED connector (KIP-875)", [connector], "200", (400, 404, 409), True),
            ("/connectors/{connector}/offsets", "delete", "Reset offsets of a STOPPED connector (KIP-875)", [connector], "200", (400, 404, 409), False),
        ):  # fmt: skip
            codes_out = responses(summary, *codes)
            codes_out[ok] = codes_out.pop("200")
            operation: dict[str, Any] = {
                "summary": summary,
                "parameters": params,
                "responses": codes_out,
            }
            if body:
                operation["requestBody"] = json_object
            spec["paths"].setdefault(path, {})[method] = operation
    return spec


def create_app(
    plugins: PluginRegistry,
    *,
    override_policy: str = "All",
    exactly_once_source: str = "disabled",
    view: ClusterView | None = None,
    operations: ConnectOperations | None = None,
    loggers: Loggers | None = None,
    kafka_cluster_id: str = "",
    topic_tracking: bool = True,
    topic_tracking_reset: bool = True,
    allowed_origins: str = "",
    authenticator: BasicAuthenticator | None = None,
    client_ssl: ssl.SSLContext | None = None,
) -> web.Application:
    """The app. With a ``view``: the read-only ``/connectors`` endpoints; with
    ``operations`` too: every endpoint of a worker (writes, internal endpoints, health,
    offsets changes, cluster-wide log levels)."""
    middlewares = [errors_as_json, request_guard(allowed_origins)]
    if authenticator is not None:
        middlewares.append(basic_auth(authenticator))
    app = web.Application(middlewares=middlewares)
    if client_ssl is not None:
        app[CLIENT_SSL] = client_ssl
    if view is not None:
        ConnectorsResource(
            view,
            plugins,
            operations,
            override_policy=override_policy,
            exactly_once_source=exactly_once_source,
            topic_tracking=topic_tracking,
            topic_tracking_reset=topic_tracking_reset,
        ).register(app)
        OffsetsResource(view, plugins, operations).register(app)
    if operations is not None:
        InternalResource(operations).register(app)
        ops = operations

        async def health(request: web.Request) -> web.Response:
            if ops.ready():
                return web.json_response(
                    {
                        "status": "healthy",
                        "message": "Worker has completed startup and is ready to handle requests.",
                    }
                )
            return web.json_response(
                {"status": "starting", "message": "Worker is still starting up."}, status=503
            )

        app.router.add_get("/health", health)
    LoggersResource(loggers or Loggers(), operations).register(app)
    resource = PluginResource(plugins, override_policy, exactly_once_source)
    app.router.add_get("/connector-plugins", resource.list)
    app.router.add_get("/connector-plugins/{plugin}/config", resource.config)
    app.router.add_put("/connector-plugins/{plugin}/config/validate", resource.validate)

    async def openapi_json(request: web.Request) -> web.Response:
        spec = openapi(connectors=view is not None, herder=operations is not None)
        return web.json_response(spec)

    async def root(request: web.Request) -> web.Response:
        """``GET /``: version, commit and the Kafka cluster's id (``RootResource``)."""
        return web.json_response(
            {"version": VERSION, "commit": COMMIT, "kafka_cluster_id": kafka_cluster_id}
        )

    app.router.add_get("/", root)
    app.router.add_get("/openapi.json", openapi_json)
    return app
