"""The distributed herder's side of the REST operations (``rest.operations``), as
Kafka's ``DistributedHerder`` serves them:

- create, reconfigure, delete and stop are writes: queued until the group is settled,
  run on the leader (``requests``); ``stop`` writes an empty task set first, then the
  STOPPED target state (``DistributedHerder.stopConnector``);
- pause and resume are served by the receiving worker, which writes the target state
  itself (``AbstractHerder.pauseConnector``: not a privileged write);
- connector restarts and offset changes need a settled group: 409 when a rebalance is
  due (``checkRebalanceNeeded``); a task restart is served by the worker running it;
- an unknown connector is 404, whatever the group is doing.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from oncelog.connect.api.connector import partition_key
from oncelog.connect.api.errors import ConnectException, ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.herder import Herder
from oncelog.connect.distributed.requests import Kind
from oncelog.connect.kafka_io.task_clients import SinkOffsetsAdmin
from oncelog.connect.runtime.connector_offsets import (
    require_stopped,
    sink_offsets_json,
    source_offsets_json,
)
from oncelog.connect.runtime.restart_plan import RestartPlan, restart_plan
from oncelog.connect.runtime.source_offset_changes import SourceOffsetChanges
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_records import (
    LoggerLevelRecord,
    RestartRequestRecord,
    TargetStateRecord,
)

READ_TIMEOUT_S = 30.0
T = TypeVar("T")


def _not_found(name: str) -> ConnectRestException:
    return ConnectRestException(404, f"Connector {name} not found")


class DistributedOperations:
    def __init__(self, herder: Herder, cluster: ClusterState) -> None:
        self.herder = herder
        self.cluster = cluster
        # Pause and resume write the target state on the receiving worker, off the
        # event loop and off the herder thread (which may be in a rebalance).
        self._writes = concurrent.futures.ThreadPoolExecutor(1, "target-state-writer")

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
            raise _not_found(name)
        return config

    def _write(self, fn: Any, kind: Kind = Kind.WRITE) -> concurrent.futures.Future[Any]:
        return self.herder.submit(fn, kind)

    def _after_known(
        self, name: str, then: Callable[[], concurrent.futures.Future[T]]
    ) -> concurrent.futures.Future[T]:
        """``then()`` once ``name`` is known here; 404 otherwise, whatever the group is
        doing. A connector this worker has not read yet (created a moment ago through
        another worker) is looked up again after reading the config topic to its end."""
        if self.herder.configs.snapshot().contains(name):
            return then()
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def chain(checked: concurrent.futures.Future[None]) -> None:
            error = checked.exception()
            if error is not None:
                done.set_exception(error)
                return
            try:
                inner = then()
            except Exception as exc:
                done.set_exception(exc)
                return
            inner.add_done_callback(
                lambda r: (
                    done.set_exception(e) if (e := r.exception()) else done.set_result(r.result())
                )
            )

        def look_up() -> None:
            self.herder.configs.read_to_end()
            self._config(name)

        self._write(look_up, Kind.LOCAL).add_done_callback(chain)
        return done

    # -- connectors ------------------------------------------------------------------------

    def create_connector(
        self, name: str, config: Mapping[str, str], target: TargetState | None
    ) -> concurrent.futures.Future[None]:
        def create() -> None:
            if self.herder.configs.snapshot().contains(name):
                raise ConnectRestException(409, f"Connector {name} already exists")
            self.herder.configs.writer.put_connector(name, config, target)

        return self._write(create)

    def put_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> concurrent.futures.Future[bool]:
        def put() -> bool:
            created = not self.herder.configs.snapshot().contains(name)
            self.herder.configs.writer.put_connector(name, config)
            return created

        return self._write(put)

    def leader_connector_config(self, name: str) -> concurrent.futures.Future[dict[str, str]]:
        return self._write(lambda: dict(self._config(name)))

    def delete_connector(self, name: str) -> concurrent.futures.Future[None]:
        def delete() -> None:
            self._config(name)
            self.herder.configs.writer.remove_connector(name)

        return self._write(delete)

    def _set_target(self, name: str, target: TargetState) -> concurrent.futures.Future[None]:
        writer = self.herder.configs.writer
        return self._after_known(
            name,
            lambda: self._writes.submit(
                writer.write_unprivileged, [TargetStateRecord(name, target)]
            ),
        )

    def pause_connector(self, name: str) -> concurrent.futures.Future[None]:
        return self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> concurrent.futures.Future[None]:
        return self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> concurrent.futures.Future[None]:
        def stop() -> None:
            self._config(name)
            writer = self.herder.configs.writer
            # Tasks first: a RUNNING connector with no tasks is fine if we fail between
            # the two writes; a STOPPED one with tasks would confuse (Kafka's order).
            writer.write_task_configs(name, [])
            writer.set_target_state(name, TargetState.STOPPED)

        return self._write(stop)

    def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> concurrent.futures.Future[RestartPlan]:
        def restart() -> RestartPlan:
            self._config(name)
            plan = restart_plan(self.cluster.statuses(), name, include_tasks, only_failed)
            self.herder.configs.writer.request_restart(
                RestartRequestRecord(name, include_tasks, only_failed)
            )
            return plan

        return self._after_known(name, lambda: self._write(restart, Kind.SETTLED))

    def restart_task(self, task: ConnectorTaskId) -> concurrent.futures.Future[None]:
        return self._write(lambda: self.herder.restarts.restart_task(task), Kind.LOCAL)

    def task_metrics(self, task: ConnectorTaskId) -> dict[str, Any] | None:
        return self.herder.worker.task_metrics(task)

    def reset_active_topics(self, name: str) -> None:
        self._config(name)
        self.herder.statuses.reset_active_topics(name, READ_TIMEOUT_S)

    # -- offsets (KIP-875) -----------------------------------------------------------------

    def _is_sink(self, config: Mapping[str, str]) -> bool:
        return self.herder.plugins.connector_type(config) == "sink"

    def _sink_admin(self) -> SinkOffsetsAdmin:
        return SinkOffsetsAdmin(self.herder.config.shared_client_config())

    def _source_offsets(self) -> SourceOffsetChanges:
        herder = self.herder
        return SourceOffsetChanges(
            herder.config, herder.worker.clients, herder.offsets, READ_TIMEOUT_S
        )

    def connector_offsets(self, name: str) -> concurrent.futures.Future[dict[str, Any]]:
        config = self._config(name)
        if self._is_sink(config):
            pool = concurrent.futures.ThreadPoolExecutor(1)
            future = pool.submit(
                lambda: sink_offsets_json(self._sink_admin().offsets(f"connect-{name}"))
            )
            pool.shutdown(wait=False)
            return future
        return self._write(
            lambda: source_offsets_json(self._source_offsets().current(name, config)), Kind.LOCAL
        )

    def _stopped_config(self, name: str) -> dict[str, str]:
        config = self._config(name)
        snapshot = self.herder.configs.snapshot()
        require_stopped(name, snapshot.target_state(name), snapshot.task_counts.get(name, 0))
        return config

    def _modify_offsets(
        self, name: str, modify: Callable[[dict[str, str]], bool]
    ) -> concurrent.futures.Future[bool]:
        """Kafka's ``DistributedHerder.modifyConnectorOffsets``: on the leader, for a
        STOPPED connector. A source connector with exactly-once support enabled gets a
        round of zombie fencing first, then the checks run again (the round is
        asynchronous) before ``modify``."""
        done: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def first() -> bool | concurrent.futures.Future[None]:
            config = self._stopped_config(name)
            if self._is_sink(config) or not self.herder.config.exactly_once_source_enabled():
                return modify(config)
            return self.herder.fence_zombies(name)

        def after_fencing(round_: concurrent.futures.Future[None]) -> None:
            error = round_.exception()
            if error is not None:
                done.set_exception(
                    ConnectException(
                        "Failed to perform zombie fencing for source connector prior to "
                        f"modifying offsets: {error}"
                    )
                )
                return
            then = self._write(lambda: modify(self._stopped_config(name)), Kind.SETTLED)
            _forward(then, done)

        def after_first(started: concurrent.futures.Future[Any]) -> None:
            error = started.exception()
            if error is not None:
                done.set_exception(error)
            elif isinstance(started.result(), bool):
                done.set_result(started.result())
            else:
                started.result().add_done_callback(after_fencing)

        self._after_known(name, lambda: self._write(first, Kind.SETTLED)).add_done_callback(
            after_first
        )
        return done

    def alter_connector_offsets(self, name: str, offsets: Any) -> concurrent.futures.Future[bool]:
        def alter(config: dict[str, str]) -> bool:
            connector: Any = self.herder.plugins.connector_class(config["connector.class"])()
            confirmed = bool(connector.alter_offsets(config, offsets))
            if self._is_sink(config):
                self._sink_admin().alter(f"connect-{name}", offsets)
            else:
                self._source_offsets().write(name, config, offsets)
            return confirmed

        return self._modify_offsets(name, alter)

    def reset_connector_offsets(self, name: str) -> concurrent.futures.Future[bool]:
        def reset(config: dict[str, str]) -> bool:
            connector: Any = self.herder.plugins.connector_class(config["connector.class"])()
            if self._is_sink(config):
                admin = self._sink_admin()
                current: Any = dict.fromkeys(admin.offsets(f"connect-{name}"))
                confirmed = bool(connector.alter_offsets(config, current))
                admin.delete_group(f"connect-{name}")
                return confirmed
            changes = self._source_offsets()
            erased: Any = {partition_key(p): None for p, _ in changes.current(name, config)}
            confirmed = bool(connector.alter_offsets(config, erased))
            changes.write(name, config, erased)
            return confirmed

        return self._modify_offsets(name, reset)

    # -- internal endpoints ----------------------------------------------------------------

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        self.herder.check_internal_request(body, headers)

    def put_task_configs(
        self, name: str, configs: list[dict[str, str]]
    ) -> concurrent.futures.Future[None]:
        return self._write(lambda: self.herder.configs.writer.write_task_configs(name, configs))

    def fence_zombies(self, name: str) -> concurrent.futures.Future[None]:
        """Served even during a rebalance (KAFKA-15059): the round's future."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def chain(started: concurrent.futures.Future[concurrent.futures.Future[None]]) -> None:
            error = started.exception()
            if error is not None:
                done.set_exception(error)
                return
            started.result().add_done_callback(
                lambda r: done.set_exception(e) if (e := r.exception()) else done.set_result(None)
            )

        self._write(lambda: self.herder.fence_zombies(name), Kind.LOCAL).add_done_callback(chain)
        return done

    # -- logging (KIP-976) -----------------------------------------------------------------

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        self.herder.configs.writer.write_unprivileged([LoggerLevelRecord(namespace, level)])


def _forward(source: concurrent.futures.Future[T], target: concurrent.futures.Future[T]) -> None:
    source.add_done_callback(
        lambda f: target.set_exception(e) if (e := f.exception()) else target.set_result(f.result())
    )
