"""Forwarding to the leader takes at most two hops (Kafka's ``forward`` parameter).

Three REST servers whose herders each name the next one as leader (a stale view of
the cluster, as during a leader change): a request goes A -> B (``forward=true``) ->
C (``forward=false``), and C answers 409 instead of forwarding again."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import aiohttp
from aiohttp import web

from oncelog.connect.distributed.errors import NotLeaderError
from oncelog.connect.distributed.requests import GroupView, Kind, RequestQueue
from oncelog.connect.rest.app import create_app
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_records import ConnectorConfigRecord, encode


class StaleFollower:
    """Operations of a worker that is not the leader and names ``leader_url`` as the
    leader (only what this test calls)."""

    def __init__(self) -> None:
        self.cluster = ClusterState()
        key, value = encode(ConnectorConfigRecord("x", {"connector.class": "FileStreamSource"}))
        self.cluster.apply_config(0, key, value)
        self.leader_url: str | None = None

    def view(self) -> ClusterState:
        return self.cluster

    def delete_connector(self, name: str) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.set_exception(NotLeaderError(self.leader_url))
        return future


async def _scenario() -> tuple[int, dict[str, Any], list[tuple[str, str | None]]]:
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

        app = create_app(
            PluginRegistry.with_builtins(),
            view=herder.cluster,
            operations=herder,  # type: ignore[arg-type]
        )
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
    try:
        async with aiohttp.ClientSession() as session:
            async with session.delete(f"{urls[0]}connectors/x") as response:
                return response.status, await response.json(), seen
    finally:
        for runner in runners:
            await runner.cleanup()


def test_a_request_is_forwarded_at_most_twice() -> None:
    status, body, seen = asyncio.run(_scenario())
    assert seen == [("A", None), ("B", "true"), ("C", "false")]
    assert status == 409
    assert body == {
        "error_code": 409,
        "message": "Cannot complete request because of a conflicting operation (e.g. worker rebalance)",
    }


def _group(**changes: Any) -> GroupView:
    settled = {
        "rebalancing": False,
        "rebalance_due": False,
        "leader_url": "http://l/",
        "is_leader": True,
    }
    return GroupView(**{**settled, **changes})


def test_writes_wait_for_a_rebalance_instead_of_failing() -> None:
    """``DistributedHerder`` queues writes while the group rebalances (no 409)."""
    queue = RequestQueue()
    write = queue.submit(lambda: "written", Kind.WRITE)
    local = queue.submit(lambda: "read", Kind.LOCAL)
    queue.serve(_group(rebalancing=True))
    assert local.result(0) == "read"
    assert not write.done()
    queue.serve(_group(rebalance_due=True))
    assert not write.done()
    queue.serve(_group())
    assert write.result(0) == "written"


def test_settled_requests_get_409_only_when_a_rebalance_is_due() -> None:
    queue = RequestQueue()
    restart = queue.submit(lambda: "restarted", Kind.SETTLED)
    queue.serve(_group(rebalancing=True))  # under way: wait for it
    assert not restart.done()
    queue.serve(_group(rebalance_due=True))  # due, not started: checkRebalanceNeeded
    assert restart.exception(0).status == 409  # type: ignore[union-attr]


def test_a_follower_fails_writes_with_the_leader_url_and_drops_cancelled_ones() -> None:
    queue = RequestQueue()
    write = queue.submit(lambda: "written", Kind.WRITE)
    cancelled = queue.submit(lambda: (_ for _ in ()).throw(AssertionError("ran")), Kind.WRITE)
    assert cancelled.cancel()
    queue.serve(_group(is_leader=False))
    error = write.exception(0)
    assert isinstance(error, NotLeaderError) and error.leader_url == "http://l/"
