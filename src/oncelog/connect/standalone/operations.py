"""The standalone herder's side of the REST operations (``rest.operations``), as Kafka's
``StandaloneHerder`` serves them: every request runs on the herder thread, in order;
there is no leader to forward to and no rebalance to wait for. The internal
endpoints (task configs, fencing) belong to distributed mode: 400 here.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from oncelog.connect.api.connector import partition_key
from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.kafka_io.task_clients import SinkOffsetsAdmin
from oncelog.connect.runtime.connector_offsets import (
    require_stopped,
    sink_offsets_json,
    source_offsets_json,
)
from oncelog.connect.runtime.loggers import parse_level
from oncelog.connect.runtime.restart_plan import RestartPlan
from oncelog.connect.standalone.herder import StandaloneHerder
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_records import (
    ConnectorConfigRecord,
    TargetStateRecord,
    connector_removal_records,
    task_config_records,
)

T = TypeVar("T")
UNSUPPORTED = "This endpoint is only served in distributed mode"


class StandaloneOperations:
    def __init__(self, herder: StandaloneHerder, cluster: ClusterState) -> None:
        self.herder = herder
        self.cluster = cluster

    @property
    def url(self) -> str:
        return self.herder.url

    @property
    def worker_id(self) -> str:
        return self.herder.worker_id

    def view(self) -> ClusterState:
        return self.cluster

    def ready(self) -> bool:
        return self.herder.joined.is_set()

    def _config(self, name: str) -> dict[str, str]:
        config = self.herder.configs.snapshot().connector_configs.get(name)
        if config is None:
            raise ConnectRestException(404, f"Connector {name} not found")
        return config

    def _run(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        def then_act() -> T:
            result = fn()
            self.herder.tick()  # act on what changed before answering
            return result

        return self.herder.submit(then_act)

    # -- connectors ------------------------------------------------------------------------

    def create_connector(
        self, name: str, config: Mapping[str, str], target: TargetState | None
    ) -> concurrent.futures.Future[None]:
        def create() -> None:
            if self.herder.configs.snapshot().contains(name):
                raise ConnectRestException(409, f"Connector {name} already exists")
            records: list[Any] = [] if target is None else [TargetStateRecord(name, target)]
            self.herder.configs.write([*records, ConnectorConfigRecord(name, dict(config))])

        return self._run(create)

    def put_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> concurrent.futures.Future[bool]:
        def put() -> bool:
            created = not self.herder.configs.snapshot().contains(name)
            self.herder.configs.write([ConnectorConfigRecord(name, dict(config))])
            return created

        return self._run(put)

    def leader_connector_config(self, name: str) -> concurrent.futures.Future[dict[str, str]]:
        return self.herder.submit(lambda: dict(self._config(name)))

    def delete_connector(self, name: str) -> concurrent.futures.Future[None]:
        def delete() -> None:
            self._config(name)
            self.herder.configs.write(connector_removal_records(name))

        return self._run(delete)

    def _set_target(self, name: str, target: TargetState) -> concurrent.futures.Future[None]:
        def write() -> None:
            self._config(name)
            self.herder.configs.write([TargetStateRecord(name, target)])

        return self._run(write)

    def pause_connector(self, name: str) -> concurrent.futures.Future[None]:
        return self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> concurrent.futures.Future[None]:
        return self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> concurrent.futures.Future[None]:
        def stop() -> None:
            self._config(name)
            self.herder.configs.write(
                [*task_config_records(name, []), TargetStateRecord(name, TargetState.STOPPED)]
            )

        return self._run(stop)

    def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> concurrent.futures.Future[RestartPlan]:
        def restart() -> RestartPlan:
            self._config(name)
            return self.herder.restart_connector(name, include_tasks, only_failed)

        return self.herder.submit(restart)

    def restart_task(self, task: ConnectorTaskId) -> concurrent.futures.Future[None]:
        return self.herder.submit(lambda: self.herder.restart_task(task))

    def task_metrics(self, task: ConnectorTaskId) -> dict[str, Any] | None:
        return self.herder.worker.task_metrics(task)

    def reset_active_topics(self, name: str) -> None:
        self._config(name)
        self.herder.statuses.reset_active_topics(name, 30.0)

    # -- offsets (KIP-875) -----------------------------------------------------------------

    def _is_sink(self, config: Mapping[str, str]) -> bool:
        return self.herder.plugins.connector_type(config) == "sink"

    def _sink_admin(self) -> SinkOffsetsAdmin:
        return SinkOffsetsAdmin(self.herder.config.shared_client_config())

    def connector_offsets(self, name: str) -> concurrent.futures.Future[dict[str, Any]]:
        def read() -> dict[str, Any]:
            if self._is_sink(self._config(name)):
                return sink_offsets_json(self._sink_admin().offsets(f"connect-{name}"))
            return source_offsets_json(self.cluster.offsets().connector_offsets(name))

        return self.herder.submit(read)

    def _change_offsets(self, name: str, offsets: Any | None) -> bool:
        """Alter (``offsets``) or reset (None) a STOPPED connector's offsets."""
        config = self._config(name)
        require_stopped(name, self.herder.configs.snapshot().target_state(name))
        connector = self.herder.connector_instance(name)
        if self._is_sink(config):
            admin = self._sink_admin()
            if offsets is not None:
                confirmed = bool(connector.alter_offsets(config, offsets))
                admin.alter(f"connect-{name}", offsets)
                return confirmed
            current: Any = dict.fromkeys(admin.offsets(f"connect-{name}"))
            confirmed = bool(connector.alter_offsets(config, current))
            admin.delete_group(f"connect-{name}")
            return confirmed
        if offsets is None:
            pairs = self.cluster.offsets().connector_offsets(name)
            offsets = {partition_key(p): None for p, _ in pairs}
        confirmed = bool(connector.alter_offsets(config, offsets))
        self.herder.offsets.write_offsets(name, offsets)
        return confirmed

    def alter_connector_offsets(self, name: str, offsets: Any) -> concurrent.futures.Future[bool]:
        return self.herder.submit(lambda: self._change_offsets(name, offsets))

    def reset_connector_offsets(self, name: str) -> concurrent.futures.Future[bool]:
        return self.herder.submit(lambda: self._change_offsets(name, None))

    # -- internal endpoints ----------------------------------------------------------------

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        raise ConnectRestException(400, UNSUPPORTED)

    def put_task_configs(
        self, name: str, configs: list[dict[str, str]]
    ) -> concurrent.futures.Future[None]:
        raise ConnectRestException(400, UNSUPPORTED)

    def fence_zombies(self, name: str) -> concurrent.futures.Future[None]:
        raise ConnectRestException(400, UNSUPPORTED)

    # -- logging ---------------------------------------------------------------------------

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """One worker is the whole cluster (Kafka's ``StandaloneHerder``)."""
        parsed = parse_level(level)
        if parsed is not None:
            self.herder.loggers.set_level(namespace, parsed)
