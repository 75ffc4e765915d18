"""What the REST resources may ask of a herder: the one interface between the REST
layer and the distributed or standalone herder (Kafka Connect's ``Herder``
interface, cut to what the resources use). Resources never read a herder's fields.

Operations that run on the herder thread return a future; the resource waits for it
within the request timeout. A distributed herder fails a write served on a follower
with ``NotLeaderError`` (the resource forwards the request to the leader), a task
operation on the wrong worker with ``NotAssignedError`` (forwarded to the owner), and
a request that needs a settled group while a rebalance is due with 409.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import Any, Protocol

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.restart_plan import RestartPlan
from oncelog.connect.storage.config_state import ClusterConfigSnapshot
from oncelog.connect.storage.offsets import OffsetsView
from oncelog.connect.storage.status_state import StatusState

Future = concurrent.futures.Future


class ClusterView(Protocol):
    """What the worker has read from its internal topics (read-only)."""

    def snapshot(self) -> ClusterConfigSnapshot: ...

    def statuses(self) -> StatusState: ...

    def offsets(self) -> OffsetsView: ...


class ConnectOperations(Protocol):
    @property
    def url(self) -> str:
        """This worker's advertised REST URL."""

    @property
    def worker_id(self) -> str: ...

    def view(self) -> ClusterView: ...

    def ready(self) -> bool:
        """The worker has completed startup (``GET /health``)."""

    # -- connectors ------------------------------------------------------------------------

    def create_connector(
        self, name: str, config: Mapping[str, str], target: TargetState | None
    ) -> Future[None]:
        """409 if it exists."""

    def put_connector_config(self, name: str, config: Mapping[str, str]) -> Future[bool]:
        """True if the connector was created."""

    def leader_connector_config(self, name: str) -> Future[dict[str, str]]:
        """The config as the leader holds it (the base of a PATCH); 404 if unknown."""

    def delete_connector(self, name: str) -> Future[None]: ...

    def pause_connector(self, name: str) -> Future[None]:
        """Served by the receiving worker (it writes the target state)."""

    def resume_connector(self, name: str) -> Future[None]: ...

    def stop_connector(self, name: str) -> Future[None]: ...

    def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> Future[RestartPlan]: ...

    def restart_task(self, task: ConnectorTaskId) -> Future[None]: ...

    def task_metrics(self, task: ConnectorTaskId) -> dict[str, Any] | None:
        """The metrics of a task running here (None if it does not run here)."""

    def reset_active_topics(self, name: str) -> None:
        """KIP-558 ``PUT /connectors/{c}/topics/reset``: blocking."""

    # -- offsets (KIP-875) -----------------------------------------------------------------

    def connector_offsets(self, name: str) -> Future[dict[str, Any]]: ...

    def alter_connector_offsets(self, name: str, body: Any) -> Future[bool]:
        """True if the connector confirmed the change (``alter_offsets``)."""

    def reset_connector_offsets(self, name: str) -> Future[bool]: ...

    # -- internal endpoints ----------------------------------------------------------------

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None: ...

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> Future[None]: ...

    def fence_zombies(self, name: str) -> Future[None]: ...

    # -- logging (KIP-976) -----------------------------------------------------------------

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Write a cluster-wide level to the config topic: blocking."""
