"""``/connectors``: Kafka Connect's ``ConnectorsResource``, its paths, bodies and status
codes.

Reads are served from this worker's view of the internal topics. Everything else goes
through the herder's operations (``operations``), served here or forwarded
(``forwarding``). Config validation runs before anything is queued, so an invalid
config gets 400 with every per-field message. An unknown connector is 404 for every
verb.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from oncelog.connect.api.errors import ConfigException, ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.errors import NotLeaderError
from oncelog.connect.rest import views
from oncelog.connect.rest.forwarding import empty_response, forward, serve_or_forward, wait_for
from oncelog.connect.rest.json_bodies import json_body, string_map
from oncelog.connect.rest.operations import ClusterView, ConnectOperations
from oncelog.connect.runtime.connector_validation import validate_connector_config
from oncelog.connect.runtime.plugins import PluginRegistry

INITIAL_STATES = {
    "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED,
    "STOPPED": TargetState.STOPPED,
}


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def _name_matches(config: Mapping[str, Any], name: str) -> None:
    if config.get("name", name) != name:
        raise ConnectRestException(
            400,
            f"Connector name configuration ({config['name']}) doesn't match connector name "
            f"in the URL ({name})",
        )


class ConnectorsResource:
    def __init__(
        self,
        view: ClusterView,
        plugins: PluginRegistry,
        operations: ConnectOperations | None = None,
        *,
        override_policy: str = "All",
        exactly_once_source: str = "disabled",
        topic_tracking: bool = True,
        topic_tracking_reset: bool = True,
    ) -> None:
        self.view = view
        self.plugins = plugins
        self.ops = operations
        self.override_policy = override_policy
        self.exactly_once_source = exactly_once_source
        self.topic_tracking = topic_tracking
        self.topic_tracking_reset = topic_tracking_reset

    # -- helpers ---------------------------------------------------------------------------

    def connector_type(self, connector: str) -> str | None:
        return self.plugins.connector_type(
            self.view.snapshot().connector_configs.get(connector, {})
        )

    def _require(self, name: str) -> dict[str, str]:
        config = self.view.snapshot().connector_configs.get(name)
        if config is None:
            raise views.not_found(name)
        return config

    def _info(self, name: str) -> dict[str, Any]:
        return views.connector_info(self.view.snapshot(), name, self.connector_type)

    def _task(self, request: web.Request) -> ConnectorTaskId:
        name, number = request.match_info["connector"], request.match_info["task"]
        self._require(name)
        task = ConnectorTaskId(name, int(number)) if number.isdigit() else None
        if task is None or task not in self.view.snapshot().task_configs:
            raise ConnectRestException(404, f"Task {name}-{number} not found")
        return task

    @property
    def _operations(self) -> ConnectOperations:
        assert self.ops is not None
        return self.ops

    async def _validate(self, config: Mapping[str, str]) -> None:
        """400 with every error; on a thread, as a connector's validation may block."""
        try:
            result = await asyncio.to_thread(
                validate_connector_config,
                config,
                self.plugins,
                self.override_policy,
                self.exactly_once_source,
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

    # -- reads -----------------------------------------------------------------------------

    async def list(self, request: web.Request) -> web.Response:
        expand = request.query.getall("expand", [])
        body = views.list_connectors(
            self.view.snapshot(), self.view.statuses(), expand, self.connector_type
        )
        return web.json_response(body)

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response(self._info(request.match_info["connector"]))

    async def config(self, request: web.Request) -> web.Response:
        return web.json_response(
            views.connector_config(self.view.snapshot(), request.match_info["connector"])
        )

    async def tasks(self, request: web.Request) -> web.Response:
        return web.json_response(
            views.task_configs(self.view.snapshot(), request.match_info["connector"])
        )

    async def status(self, request: web.Request) -> web.Response:
        name = request.match_info["connector"]
        return web.json_response(
            views.connector_status(
                self.view.snapshot(), self.view.statuses(), name, self.connector_type
            )
        )

    async def task_status(self, request: web.Request) -> web.Response:
        name, task = request.match_info["connector"], request.match_info["task"]
        if not task.isdigit():
            self._require(name)
            raise ConnectRestException(404, f"Task {task} not found")
        return web.json_response(
            views.task_status(self.view.snapshot(), self.view.statuses(), name, int(task))
        )

    async def topics(self, request: web.Request) -> web.Response:
        """KIP-558 ``GET /connectors/{c}/topics`` (403 when tracking is disabled)."""
        if not self.topic_tracking:
            raise ConnectRestException(403, "Topic tracking is disabled.")
        name = request.match_info["connector"]
        self._require(name)
        return web.json_response(self.view.statuses().active_topics_json(name))

    # -- writes ----------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.StreamResponse:
        """``POST /connectors``: 201 with the connector's info; 409 if it exists."""
        body = await json_body(request)
        if not isinstance(body, dict):
            raise ConnectRestException(400, "Request body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConnectRestException(400, "Connector name must not be empty")
        name = name.strip()
        config = string_map(body.get("config"), "Connector configuration")
        _name_matches(config, name)
        config["name"] = name
        initial = body.get("initial_state")
        target = None
        if initial is not None:
            if not isinstance(initial, str) or initial.upper() not in INITIAL_STATES:
                raise ConnectRestException(
                    400, f"Invalid initial state {initial}; use RUNNING, PAUSED or STOPPED"
                )
            target = INITIAL_STATES[initial.upper()]
        await self._validate(config)
        return await serve_or_forward(
            request,
            lambda: self._operations.create_connector(name, config, target),
            lambda _: web.json_response(self._info(name), status=201),
        )

    async def put_config(self, request: web.Request) -> web.StreamResponse:
        """``PUT /connectors/{c}/config``: 201 when created, 200 when updated."""
        name = request.match_info["connector"]
        config = string_map(await json_body(request), "Connector configuration")
        _name_matches(config, name)
        config["name"] = name
        await self._validate(config)
        return await serve_or_forward(
            request,
            lambda: self._operations.put_connector_config(name, config),
            lambda created: web.json_response(self._info(name), status=201 if created else 200),
        )

    async def patch_config(self, request: web.Request) -> web.StreamResponse:
        """``PATCH /connectors/{c}/config``: merged on the leader's config (null removes a
        key); 404 if unknown."""
        name = request.match_info["connector"]
        patch = await json_body(request)
        if not isinstance(patch, dict) or not all(
            v is None or isinstance(v, str) for v in patch.values()
        ):
            raise ConnectRestException(
                400, "Connector configuration patch must be a JSON object of strings or nulls"
            )
        _name_matches(patch, name)
        ops = self._operations

        async def merged_write() -> web.StreamResponse:
            current: dict[str, str] = await wait_for(ops.leader_connector_config(name))
            merged: dict[str, str] = dict(current)
            for key, value in patch.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            await self._validate(merged)
            await wait_for(ops.put_connector_config(name, merged))
            return web.json_response(self._info(name))

        try:
            return await merged_write()
        except NotLeaderError as exc:
            return await forward(request, exc.leader_url)

    async def pause(self, request: web.Request) -> web.StreamResponse:
        """202, served by this worker (``AbstractHerder.pauseConnector``)."""
        await wait_for(self._operations.pause_connector(request.match_info["connector"]))
        return web.Response(status=202)

    async def resume(self, request: web.Request) -> web.StreamResponse:
        await wait_for(self._operations.resume_connector(request.match_info["connector"]))
        return web.Response(status=202)

    async def stop(self, request: web.Request) -> web.StreamResponse:
        """204 once the empty task set and the STOPPED state are written (KIP-875)."""
        name = request.match_info["connector"]
        return await serve_or_forward(
            request, lambda: self._operations.stop_connector(name), empty_response(204)
        )

    async def delete(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["connector"]
        return await serve_or_forward(
            request, lambda: self._operations.delete_connector(name), empty_response(204)
        )

    async def restart(self, request: web.Request) -> web.StreamResponse:
        """``POST /connectors/{c}/restart[?includeTasks=&onlyFailed=]`` (KIP-745): 204
        for the connector alone, else 202 with what will restart."""
        name = request.match_info["connector"]
        include_tasks, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")

        def respond(plan: Any) -> web.StreamResponse:
            if not include_tasks and not only_failed:
                return web.Response(status=204)
            status = views.connector_status(
                self.view.snapshot(), self.view.statuses(), name, self.connector_type
            )
            return web.json_response(views.restarting_status(plan, status), status=202)

        return await serve_or_forward(
            request,
            lambda: self._operations.restart_connector(name, include_tasks, only_failed),
            respond,
        )

    async def restart_task(self, request: web.Request) -> web.StreamResponse:
        """``POST /connectors/{c}/tasks/{t}/restart``: served by the worker running it."""
        task = self._task(request)
        return await serve_or_forward(
            request, lambda: self._operations.restart_task(task), empty_response(204)
        )

    async def task_metrics(self, request: web.Request) -> web.StreamResponse:
        """``GET /connectors/{c}/tasks/{t}/metrics``: the task's counters and, for an
        exactly-once source task, ``transaction-size-min/max/avg``. Served by the worker
        running the task; another worker forwards the request there once."""
        task = self._task(request)
        ops = self._operations
        metrics = ops.task_metrics(task)
        if metrics is not None:
            return web.json_response(
                {"connector": task.connector, "task": task.task, "worker_id": ops.worker_id,
                 "metrics": metrics}
            )  # fmt: skip
        status = self.view.statuses().tasks.get((task.connector, task.task))
        owner = status.worker_id if status is not None else None
        if owner and owner != ops.worker_id and request.query.get("forward") is None:
            return await forward(request, f"http://{owner}")
        raise ConnectRestException(404, f"Task {task} is not running on this worker")

    async def reset_topics(self, request: web.Request) -> web.StreamResponse:
        """KIP-558 ``PUT /connectors/{c}/topics/reset``: 202; 403 when tracking or its
        reset is disabled."""
        if not self.topic_tracking:
            raise ConnectRestException(403, "Topic tracking is disabled.")
        if not self.topic_tracking_reset:
            raise ConnectRestException(403, "Topic tracking reset is disabled.")
        name = request.match_info["connector"]
        await asyncio.to_thread(self._operations.reset_active_topics, name)
        return web.Response(status=202)

    def register(self, app: web.Application) -> None:
        router = app.router
        router.add_get("/connectors", self.list)
        router.add_get("/connectors/{connector}", self.info)
        router.add_get("/connectors/{connector}/config", self.config)
        router.add_get("/connectors/{connector}/tasks", self.tasks)
        router.add_get("/connectors/{connector}/status", self.status)
        router.add_get("/connectors/{connector}/tasks/{task}/status", self.task_status)
        router.add_get("/connectors/{connector}/topics", self.topics)
        if self.ops is None:
            return
        router.add_post("/connectors", self.create)
        router.add_put("/connectors/{connector}/config", self.put_config)
        router.add_patch("/connectors/{connector}/config", self.patch_config)
        router.add_put("/connectors/{connector}/pause", self.pause)
        router.add_put("/connectors/{connector}/resume", self.resume)
        router.add_put("/connectors/{connector}/stop", self.stop)
        router.add_post("/connectors/{connector}/restart", self.restart)
        router.add_post("/connectors/{connector}/tasks/{task}/restart", self.restart_task)
        router.add_get("/connectors/{connector}/tasks/{task}/metrics", self.task_metrics)
        router.add_put("/connectors/{connector}/topics/reset", self.reset_topics)
        router.add_delete("/connectors/{connector}", self.delete)
