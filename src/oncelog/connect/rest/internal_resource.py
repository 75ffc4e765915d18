"""The internal endpoints workers call on each other (Kafka Connect's
``InternalConnectResource``), signed with the cluster's session key (KIP-507):

- ``PUT /connectors/{c}/tasks``: a connector's worker hands its task configs to the
  leader;
- ``PUT /connectors/{c}/fence`` (KIP-618): the leader fences out the connector's
  previous task generation and writes a task-count record (read back) before answering
  204. Served even during a rebalance (KAFKA-15059); a follower forwards it, signature
  included. 500 with the error when fencing fails, 409 when new task configs arrived
  meanwhile.
"""

from __future__ import annotations

import traceback

from aiohttp import web

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.rest.forwarding import empty_response, serve_or_forward
from oncelog.connect.rest.json_bodies import json_body, string_map
from oncelog.connect.rest.operations import ConnectOperations


class InternalResource:
    def __init__(self, operations: ConnectOperations) -> None:
        self.ops = operations

    async def put_task_configs(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["connector"]
        self.ops.check_internal_request(await request.read(), dict(request.headers))
        configs = await json_body(request)
        if not isinstance(configs, list):
            raise ConnectRestException(400, "Task configurations must be a JSON list")
        task_configs = [string_map(c, "Task configuration") for c in configs]
        return await serve_or_forward(
            request, lambda: self.ops.put_task_configs(name, task_configs), empty_response(204)
        )

    async def fence(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["connector"]
        self.ops.check_internal_request(await request.read(), dict(request.headers))
        try:
            return await serve_or_forward(
                request, lambda: self.ops.fence_zombies(name), empty_response(204)
            )
        except ConnectRestException:
            raise
        except Exception as exc:
            raise ConnectRestException(
                500, "Failed to perform zombie fencing: " + "".join(traceback.format_exception(exc))
            ) from None

    def register(self, app: web.Application) -> None:
        app.router.add_put("/connectors/{connector}/tasks", self.put_task_configs)
        app.router.add_put("/connectors/{connector}/fence", self.fence)
