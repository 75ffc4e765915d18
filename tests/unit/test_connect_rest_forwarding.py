"""Forwarding to the leader takes at most two hops (Kafka's ``forward`` parameter).

Three REST servers whose herders each name the next one as leader (a stale view of
the cluster, as during a leader change): a request goes A -> B (``forward=true``) ->
C (``forward=false``), and C answers 409 instead of forwarding again."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web

from oncelog.connect.distributed.herder import NotLeaderError, RebalanceInProgress
from oncelog.connect.rest.app import create_app
from oncelog.connect.rest.herder_resource import HerderResource
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.storage.cluster_view import ClusterState


class StaleFollower:
    """A herder that is not the leader and names ``leader_url`` as the leader."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.leader_url: str | None = None
        self.rebalancing = False

    def submit(
        self, fn: Callable[[], Any], *, leader_only: bool = True
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_exception(
            RebalanceInProgress() if self.rebalancing else NotLeaderError(self.leader_url)
        )
        return future


async def _scenario(rebalancing: bool) -> tuple[int, dict[str, Any], list[tuple[str, str | None]]]:
    seen: list[tuple[str, str | None]] = []
    runners, urls, herders = [], [], []
    for name in "ABC":
        herder = StaleFollower()

        @web.middleware
        async def record(
            request: web.Request, handler: Any, name: str = name
        ) -> web.StreamResponse:
            seen.append((name, request.query.get("forward")))
            return await handler(request)

        resource = HerderResource(herder, PluginRegistry.with_builtins(), "All")  # type: ignore[arg-type]
        app = create_app(PluginRegistry.with_builtins(), herder_routes=resource.register)
        app.middlewares.insert(0, record)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        runners.append(runner)
        herders.append(herder)
        urls.append(f"http://127.0.0.1:{port}/")
    for i, herder in enumerate(herders):
        herder.leader_url = urls[(i + 1) % 3]
        herder.rebalancing = rebalancing
    try:
        async with aiohttp.ClientSession() as session:
            async with session.put(f"{urls[0]}connectors/x/pause") as response:
                return response.status, await response.json(), seen
    finally:
        for runner in runners:
            await runner.cleanup()


def test_a_request_is_forwarded_at_most_twice() -> None:
    status, body, seen = asyncio.run(_scenario(rebalancing=False))
    assert seen == [("A", None), ("B", "true"), ("C", "false")]
    assert status == 409
    assert body == {
        "error_code": 409,
        "message": "Cannot complete request because of a conflicting operation (e.g. worker rebalance)",
    }


def test_a_rebalance_in_progress_answers_409_without_forwarding() -> None:
    status, body, seen = asyncio.run(_scenario(rebalancing=True))
    assert seen == [("A", None)]
    assert (status, body["error_code"]) == (409, 409)
