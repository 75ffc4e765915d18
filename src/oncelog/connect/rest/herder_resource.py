"""The REST endpoints that change the cluster, served through the herder.

Requests that write the config topic run on the herder thread of the leader. A
follower forwards them to the leader, as Kafka does, with the ``forward`` query
parameter bounding the hops to two: a request received without it is forwarded with
``forward=true``, one received with ``forward=true`` is forwarded with
``forward=false``, and one with ``forward=false`` is not forwarded again (409).
A request arriving during a rebalance gets 409.

Config validation runs before anything is queued, so an invalid config gets 400 with
every per-field message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from oncelog.connect.api.connector import SinkConnector, SourceConnector, partition_key
from oncelog.connect.api.errors import ConfigException, ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.herder import Herder, NotLeaderError
from oncelog.connect.distributed.request_signing import ALGORITHM_HEADER, SIGNATURE_HEADER
from oncelog.connect.kafka_io.task_clients import SinkOffsetsAdmin
from oncelog.connect.rest import views as rest_views
from oncelog.connect.rest.app import json_body
from oncelog.connect.rest.offsets import (
    parse_sink_offsets,
    parse_source_offsets,
    require_stopped,
    sink_offsets_json,
    source_offsets_json,
    success_message,
)
from oncelog.connect.runtime.connector_config import validate_connector_config
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.restart_plan import restart_plan
from oncelog.connect.runtime.worker_config import EXACTLY_ONCE_SOURCE_SUPPORT
from oncelog.connect.storage.config_records import RestartRequestRecord

T = TypeVar("T")
REQUEST_TIMEOUT_S = 90.0
CONFLICT = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
INITIAL_STATES = {
    "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED,
    "STOPPED": TargetState.STOPPED,
}


_SIGNATURE_HEADERS = frozenset({SIGNATURE_HEADER.lower(), ALGORITHM_HEADER.lower()})


class _Forward(Exception):
    def __init__(self, url: str | None) -> None:
        self.url = url


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConnectRestException(400, f"{what} must be a JSON object of string values")
    return dict(value)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class HerderResource:
    def __init__(self, herder: Herder, plugins: PluginRegistry, override_policy: str) -> None:
        self.herder = herder
        self.plugins = plugins
        self.override_policy = override_policy

    # -- plumbing --------------------------------------------------------------------------

    async def _on_herder(self, fn: Callable[[], T], *, leader_only: bool = True) -> T:
        future: concurrent.futures.Future[T] = self.herder.submit(fn, leader_only=leader_only)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), REQUEST_TIMEOUT_S)
        except NotLeaderError as exc:
            raise _Forward(exc.leader_url) from None
        except TimeoutError:
            raise ConnectRestException(500, "Request timed out") from None

    async def _leader(
        self, request: web.Request, fn: Callable[[], Any], respond: Callable[[Any], web.Response]
    ) -> web.Response:
        try:
            return respond(await self._on_herder(fn))
        except _Forward as forward:
            return await self._forward(request, forward.url)

    async def _forward(self, request: web.Request, base_url: str | None) -> web.Response:
        hop = request.query.get("forward")
        if base_url is None or hop == "false":
            raise ConnectRestException(409, CONFLICT)
        query = dict(request.query)
        query["forward"] = "true" if hop is None else "false"
        url = f"{base_url.rstrip('/')}{request.path}"
        headers = {"Content-Type": "application/json"}
        # An internal request keeps its signature: the body it signs is forwarded as is.
        headers.update(
            {k: v for k, v in request.headers.items() if k.lower() in _SIGNATURE_HEADERS}
        )
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                url,
                params=query,
                data=await request.read(),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
            ) as response,
        ):
            body = await response.read()
            if not body:
                return web.Response(status=response.status)
            return web.Response(status=response.status, body=body, content_type="application/json")

    def _validate(self, config: Mapping[str, str]) -> None:
        try:
            result = validate_connector_config(
                config,
                self.plugins,
                self.override_policy,
                str(self.herder.config.get(EXACTLY_ONCE_SOURCE_SUPPORT)),
            )
        except ConfigException as exc:
            raise ConnectRestException(400, str(exc)) from None
        if result["error_count"]:
            messages = [
                f"{c['value']['name']}: {error}"
                for c in result["configs"]
                for error in c["value"]["errors"]
            ]
            raise ConnectRestException(
                400,
                f"Connector configuration is invalid and contains the following "
                f"{result['error_count']} error(s):\n"
                + "\n".join(messages)
                + "\nYou can also find the above list of errors at the endpoint "
                f"`/connector-plugins/{result['name']}/config/validate`",
            )

    def _connector_type(self, name: str) -> str | None:
        config = self.herder.state.snapshot().connector_configs.get(name, {})
        try:
            cls = self.plugins.connector_class(config.get("connector.class", ""))
        except ConfigException:
            return None
        if issubclass(cls, SinkConnector):
            return "sink"
        return "source" if issubclass(cls, SourceConnector) else None

    def _require(self, name: str) -> dict[str, str]:
        config = self.herder.state.snapshot().connector_configs.get(name)
        if config is None:
            raise rest_views.not_found(name)
        return config

    def _info(self, name: str) -> dict[str, Any]:
        return rest_views.connector_info(self.herder.state.snapshot(), name, self._connector_type)

    # -- connectors ------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        """``POST /connectors``: 201 with the connector's info; 409 if it exists."""
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ConnectRestException(400, "Request body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConnectRestException(400, "Connector name must not be empty")
        name = name.strip()
        config = _string_map(body.get("config"), "Connector configuration")
        if config.get("name", name) != name:
            raise ConnectRestException(
                400,
                f"Connector name configuration ({config['name']}) doesn't match connector name in the URL ({name})",
            )
        config["name"] = name
        initial = body.get("initial_state")
        target = None
        if initial is not None:
            if not isinstance(initial, str) or initial.upper() not in INITIAL_STATES:
                raise ConnectRestException(
                    400, f"Invalid initial state {initial}; use RUNNING, PAUSED or STOPPED"
                )
            target = INITIAL_STATES[initial.upper()]
        self._validate(config)

        def create() -> dict[str, Any]:
            if self.herder.state.snapshot().contains(name):
                raise ConnectRestException(409, f"Connector {name} already exists")
            self.herder.configs.put_connector(name, config, target)
            return self._info(name)

        return await self._leader(request, create, lambda info: web.json_response(info, status=201))

    async def put_config(self, request: web.Request) -> web.Response:
        """``PUT /connectors/{c}/config``: 201 when created, 200 when updated."""
        name = request.match_info["connector"]
        config = _string_map(await json_body(request), "Connector configuration")
        if config.get("name", name) != name:
            raise ConnectRestException(
                400,
                f"Connector name configuration ({config['name']}) doesn't match connector name in the URL ({name})",
            )
        config["name"] = name
        self._validate(config)

        def put() -> tuple[bool, dict[str, Any]]:
            created = not self.herder.state.snapshot().contains(name)
            self.herder.configs.put_connector(name, config)
            return created, self._info(name)

        return await self._leader(
            request, put, lambda r: web.json_response(r[1], status=201 if r[0] else 200)
        )

    async def patch_config(self, request: web.Request) -> web.Response:
        """``PATCH /connectors/{c}/config``: merge (null removes a key); 404 if unknown."""
        name = request.match_info["connector"]
        patch = await json_body(request)
        if not isinstance(patch, dict) or not all(
            v is None or isinstance(v, str) for v in patch.values()
        ):
            raise ConnectRestException(
                400, "Connector configuration patch must be a JSON object of strings or nulls"
            )
        if patch.get("name", name) != name:
            raise ConnectRestException(
                400,
                f"Connector name configuration ({patch['name']}) doesn't match connector name in the URL ({name})",
            )
        merged = dict(self._require(name))
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self._validate(merged)

        def put() -> dict[str, Any]:
            self._require(name)
            self.herder.configs.put_connector(name, merged)
            return self._info(name)

        return await self._leader(request, put, lambda info: web.json_response(info))

    def _target_handler(self, target: TargetState, status: int) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            name = request.match_info["connector"]

            def set_state() -> None:
                self._require(name)
                self.herder.configs.set_target_state(name, target)

            return await self._leader(request, set_state, lambda _: web.Response(status=status))

        return handler

    async def delete(self, request: web.Request) -> web.Response:
        name = request.match_info["connector"]

        def delete() -> None:
            self._require(name)
            self.herder.delete_connector(name)

        return await self._leader(request, delete, lambda _: web.Response(status=204))

    async def restart(self, request: web.Request) -> web.Response:
        """``POST /connectors/{c}/restart[?includeTasks=&onlyFailed=]`` (KIP-745)."""
        name = request.match_info["connector"]
        include_tasks, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")

        def restart() -> dict[str, Any] | None:
            self._require(name)
            statuses = self.herder.state.statuses()
            plan = restart_plan(statuses, name, include_tasks, only_failed)
            self.herder.configs.request_restart(
                RestartRequestRecord(name, include_tasks, only_failed)
            )
            if not include_tasks and not only_failed:
                return None
            status = rest_views.connector_status(
                self.herder.state.snapshot(), statuses, name, self._connector_type
            )
            return rest_views.restarting_status(plan, status)

        return await self._leader(
            request,
            restart,
            lambda body: (
                web.Response(status=204) if body is None else web.json_response(body, status=202)
            ),
        )

    async def task_metrics(self, request: web.Request) -> web.Response:
        """``GET /connectors/{c}/tasks/{t}/metrics``: the task's counters and, for an
        exactly-once source task, ``transaction-size-min/max/avg``. Served by the worker
        running the task; another worker forwards the request there once."""
        name, number = request.match_info["connector"], request.match_info["task"]
        self._require(name)
        task = ConnectorTaskId(name, int(number)) if number.isdigit() else None
        if task is None or task not in self.herder.state.snapshot().task_configs:
            raise ConnectRestException(404, f"Task {name}-{number} not found")
        metrics = self.herder.worker.task_metrics(task)
        if metrics is not None:
            return web.json_response(
                {"connector": name, "task": task.task, "worker_id": self.herder.worker_id,
                 "metrics": metrics}
            )  # fmt: skip
        status = self.herder.state.statuses().tasks.get((name, task.task))
        owner = status.worker_id if status is not None else None
        if owner and owner != self.herder.worker_id and request.query.get("forward") is None:
            return await self._forward(request, f"http://{owner}")
        raise ConnectRestException(404, f"Task {name}-{number} is not running on this worker")

    async def restart_task(self, request: web.Request) -> web.Response:
        """``POST /connectors/{c}/tasks/{t}/restart``: served by the worker running the task."""
        name, number = request.match_info["connector"], request.match_info["task"]
        self._require(name)
        task = ConnectorTaskId(name, int(number)) if number.isdigit() else None
        if task is None or task not in self.herder.state.snapshot().task_configs:
            raise ConnectRestException(404, f"Task {name}-{number} not found")
        if self.herder.runs_task(task):
            try:
                await self._on_herder(lambda: self.herder.restart_task(task), leader_only=False)
                return web.Response(status=204)
            except _Forward:
                pass
        status = self.herder.state.statuses().tasks.get((name, task.task))
        owner = f"http://{status.worker_id}" if status is not None and status.worker_id else None
        if owner is not None and owner.rstrip("/") == self.herder.url.rstrip("/"):
            raise ConnectRestException(409, CONFLICT)
        return await self._forward(request, owner)

    async def put_task_configs(self, request: web.Request) -> web.Response:
        """Internal ``PUT /connectors/{c}/tasks``: a connector's worker hands its task
        configs to the leader, signed with the session key."""
        name = request.match_info["connector"]
        self.herder.check_internal_request(await request.read(), dict(request.headers))
        configs = await json_body(request)
        if not isinstance(configs, list):
            raise ConnectRestException(400, "Task configurations must be a JSON list")
        task_configs = [_string_map(c, "Task configuration") for c in configs]
        return await self._leader(
            request,
            lambda: self.herder.configs.write_task_configs(name, task_configs),
            lambda _: web.Response(status=204),
        )

    async def fence(self, request: web.Request) -> web.Response:
        """Internal ``PUT /connectors/{c}/fence`` (KIP-618), signed with the session key:
        the leader fences out the connector's previous task generation and writes a
        task-count record (read back) before answering 204, as Kafka's void resource
        does. Served even during a rebalance (KAFKA-15059); a follower forwards it,
        signature included. 500 with the error when fencing fails, 409 when new task
        configs arrived meanwhile."""
        name = request.match_info["connector"]
        self.herder.check_internal_request(await request.read(), dict(request.headers))
        try:
            round_ = await self._on_herder(
                lambda: self.herder.fence_zombies(name), leader_only=False
            )
            await asyncio.wait_for(asyncio.wrap_future(round_), REQUEST_TIMEOUT_S)
        except (_Forward, NotLeaderError) as exc:
            url = exc.url if isinstance(exc, _Forward) else exc.leader_url
            return await self._forward(request, url)
        except TimeoutError:
            raise ConnectRestException(500, "Request timed out") from None
        except ConnectRestException:
            raise
        except Exception as exc:
            raise ConnectRestException(
                500, "Failed to perform zombie fencing: " + "".join(traceback.format_exception(exc))
            ) from None
        return web.Response(status=204)

    # -- offsets (KIP-875) -----------------------------------------------------------------

    def _sink_admin(self) -> SinkOffsetsAdmin:
        return SinkOffsetsAdmin(self.herder.config.shared_client_config())

    async def get_offsets(self, request: web.Request) -> web.Response:
        name = request.match_info["connector"]
        self._require(name)
        if self._connector_type(name) == "sink":
            offsets = await asyncio.to_thread(self._sink_admin().offsets, f"connect-{name}")
            return web.json_response(sink_offsets_json(offsets))
        await self._on_herder(self.herder.read_offsets_to_end, leader_only=False)
        return web.json_response(
            source_offsets_json(self.herder.state.offsets().connector_offsets(name))
        )

    def _instance(self, config: Mapping[str, str]) -> Any:
        return self.plugins.connector_class(config["connector.class"])()

    async def alter_offsets(self, request: web.Request) -> web.Response:
        """``PATCH /connectors/{c}/offsets`` (the connector must be STOPPED)."""
        name = request.match_info["connector"]
        body = await json_body(request)
        self._require(name)
        sink = self._connector_type(name) == "sink"
        parsed: Any = parse_sink_offsets(body) if sink else parse_source_offsets(body)
        if sink and any(v is None for v in parsed.values()):
            raise ConnectRestException(
                400, "Resetting single sink partitions is not supported; use DELETE"
            )

        def alter() -> bool:
            snapshot = self.herder.state.snapshot()
            config = self._require(name)
            require_stopped(name, snapshot.target_state(name))
            confirmed = bool(self._instance(config).alter_offsets(config, parsed))
            if sink:
                self._sink_admin().alter(f"connect-{name}", parsed)
            else:
                self.herder.write_source_offsets(name, parsed)
            return confirmed

        return await self._leader(
            request,
            alter,
            lambda ok: web.json_response(success_message(reset=False, connector_confirmed=ok)),
        )

    async def reset_offsets(self, request: web.Request) -> web.Response:
        """``DELETE /connectors/{c}/offsets`` (the connector must be STOPPED)."""
        name = request.match_info["connector"]
        self._require(name)
        sink = self._connector_type(name) == "sink"

        def reset() -> bool:
            snapshot = self.herder.state.snapshot()
            config = self._require(name)
            require_stopped(name, snapshot.target_state(name))
            if sink:
                admin = self._sink_admin()
                current: Any = dict.fromkeys(admin.offsets(f"connect-{name}"))
                confirmed = bool(self._instance(config).alter_offsets(config, current))
                admin.delete_group(f"connect-{name}")
                return confirmed
            self.herder.read_offsets_to_end()
            pairs = self.herder.state.offsets().connector_offsets(name)
            erased: Any = {partition_key(p): None for p, _ in pairs}
            confirmed = bool(self._instance(config).alter_offsets(config, erased))
            self.herder.write_source_offsets(name, erased)
            return confirmed

        return await self._leader(
            request,
            reset,
            lambda ok: web.json_response(success_message(reset=True, connector_confirmed=ok)),
        )

    # -- worker ----------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        if self.herder.joined.is_set():
            return web.json_response(
                {
                    "status": "healthy",
                    "message": "Worker has completed startup and is ready to handle requests.",
                }
            )
        return web.json_response(
            {"status": "starting", "message": "Worker is still starting up."}, status=503
        )

    def register(self, app: web.Application) -> None:
        router = app.router
        router.add_post("/connectors", self.create)
        router.add_put("/connectors/{connector}/config", self.put_config)
        router.add_patch("/connectors/{connector}/config", self.patch_config)
        router.add_put(
            "/connectors/{connector}/pause", self._target_handler(TargetState.PAUSED, 202)
        )
        router.add_put(
            "/connectors/{connector}/resume", self._target_handler(TargetState.STARTED, 202)
        )
        router.add_put(
            "/connectors/{connector}/stop", self._target_handler(TargetState.STOPPED, 204)
        )
        router.add_post("/connectors/{connector}/restart", self.restart)
        router.add_post("/connectors/{connector}/tasks/{task}/restart", self.restart_task)
        router.add_get("/connectors/{connector}/tasks/{task}/metrics", self.task_metrics)
        router.add_put("/connectors/{connector}/tasks", self.put_task_configs)
        router.add_put("/connectors/{connector}/fence", self.fence)
        router.add_delete("/connectors/{connector}", self.delete)
        router.add_patch("/connectors/{connector}/offsets", self.alter_offsets)
        router.add_delete("/connectors/{connector}/offsets", self.reset_offsets)
        router.add_get("/connectors/{connector}/offsets", self.get_offsets)
        router.add_get("/health", self.health)
