"""One connector instance on a worker: its life cycle and the task configurations it
produces, stored as Kafka Connect stores them.

Task configs get ``task.class`` (the task's class name) and, for sinks, the
connector's ``topics`` / ``topics.regex``, as Kafka's worker adds them; the leader
writes them to the config topic only when they differ from the stored ones.
A connector that returns more configs than ``tasks.max`` fails (KIP-1004).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from oncelog.connect.api.connector import Config, Connector, ConnectorContext, SinkConnector
from oncelog.connect.api.errors import ConnectException

TASK_CLASS_CONFIG = "task.class"


def connector_task_configs(
    connector: Connector, connector_config: Mapping[str, str], max_tasks: int
) -> list[Config]:
    """The task configs to store for ``connector`` (already started)."""
    configs = connector.task_configs(max_tasks)
    if len(configs) > max_tasks:
        raise ConnectException(
            f"The connector {connector_config.get('name')} has generated {len(configs)} tasks, which is greater "
            f"than {max_tasks}, the maximum number of tasks it is configured to create. This behaviour should be "
            "considered a bug and is disallowed."
        )
    task_cls = connector.task_class()
    result = []
    for props in configs:
        config = dict(props)
        config[TASK_CLASS_CONFIG] = f"{task_cls.__module__}.{task_cls.__qualname__}"
        if isinstance(connector, SinkConnector):
            for key in (SinkConnector.TOPICS_CONFIG, SinkConnector.TOPICS_REGEX_CONFIG):
                if connector_config.get(key):
                    config[key] = connector_config[key]
        result.append(config)
    return result


def task_configs_changed(
    stored: Sequence[Mapping[str, str]], new: Sequence[Mapping[str, str]]
) -> bool:
    return len(stored) != len(new) or any(
        dict(a) != dict(b) for a, b in zip(stored, new, strict=True)
    )


class _Context(ConnectorContext):
    def __init__(self, owner: WorkerConnector) -> None:
        self._owner = owner

    def request_task_reconfiguration(self) -> None:
        self._owner._reconfiguration_requested.set()
        if self._owner.on_reconfiguration is not None:
            self._owner.on_reconfiguration(self._owner.name)

    def raise_error(self, error: BaseException) -> None:
        self._owner.failure = error


class WorkerConnector:
    """Runs a connector instance; failures are kept for the status topic."""

    def __init__(
        self,
        name: str,
        connector: Connector,
        on_reconfiguration: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.connector = connector
        self.on_reconfiguration = on_reconfiguration
        self.config: dict[str, str] = {}
        self.failure: BaseException | None = None
        self.running = False
        self._reconfiguration_requested = threading.Event()

    def start(self, config: Mapping[str, str]) -> bool:
        """Start the connector; False (and ``failure`` set) if it raised."""
        self.config = dict(config)
        try:
            self.connector.initialize(_Context(self))
            self.connector.start(dict(config))
        except Exception as exc:
            self.failure = exc
            return False
        self.running = True
        return True

    def task_configs(self, max_tasks: int) -> list[Config]:
        self._reconfiguration_requested.clear()
        return connector_task_configs(self.connector, self.config, max_tasks)

    def take_reconfiguration_request(self) -> bool:
        requested = self._reconfiguration_requested.is_set()
        self._reconfiguration_requested.clear()
        return requested

    def stop(self) -> None:
        if self.running:
            self.running = False
            try:
                self.connector.stop()
            except Exception as exc:
                self.failure = exc
