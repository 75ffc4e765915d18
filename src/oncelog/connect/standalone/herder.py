"""The standalone herder (Kafka Connect's ``StandaloneHerder``): one worker, no group.

It owns every connector and task. Connector configs live in memory
(``MemoryConfigStore``), statuses in memory (a ``StatusStore`` without a topic),
source offsets in a local file (``FileOffsetStore``). One thread, the herder's,
serves every request in turn (Kafka's herder is ``synchronized``), and every half
second it has running connectors regenerate their task configs when they asked to.
The same plan as in distributed mode (``worker_plan``) decides what starts, stops and
changes state; the same rule removes the statuses of what no longer exists.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.loggers import Loggers
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.restart_plan import RestartPlan, restart_plan
from oncelog.connect.runtime.work import Work
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.runtime.worker_connector import task_configs_changed
from oncelog.connect.runtime.worker_plan import LocalState, plan
from oncelog.connect.storage.config_records import task_config_records
from oncelog.connect.storage.config_state import ConnectorChanged
from oncelog.connect.storage.file_offset_store import FileOffsetStore
from oncelog.connect.storage.memory_config_store import MemoryConfigStore
from oncelog.connect.storage.status_records import ConnectorStatus, State, TaskStatus
from oncelog.connect.storage.status_store import StatusStore

log = logging.getLogger(__name__)
T = TypeVar("T")
TICK_S = 0.5
WRITE_TIMEOUT_S = 30.0


class StandaloneHerder:
    def __init__(
        self,
        config: WorkerConfig,
        plugins: PluginRegistry,
        url: str,
        *,
        configs: MemoryConfigStore,
        statuses: StatusStore,
        offsets: FileOffsetStore,
        worker: Worker,
        loggers: Loggers,
    ) -> None:
        self.config = config
        self.plugins = plugins
        self.url = url
        self.worker_id = url.split("://", 1)[-1].rstrip("/")
        self.configs = configs
        self.statuses = statuses
        self.offsets = offsets
        self.worker = worker
        self.loggers = loggers
        self.joined = threading.Event()
        self.stopped = threading.Event()
        self._stopping = threading.Event()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "herder")
        self._reconfigure: set[str] = set()

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Load the offsets file; the connectors given at start-up are then created."""
        self.submit(self.offsets.start).result()
        self.joined.set()
        threading.Thread(target=self._ticks, name="herder-ticks", daemon=True).start()

    def _ticks(self) -> None:
        while not self._stopping.wait(TICK_S):
            try:
                self.submit(self.tick).result()
            except Exception:
                log.exception("standalone herder tick failed")

    def stop(self, timeout_s: float | None = None) -> None:
        self._stopping.set()
        try:
            self._executor.submit(self._shutdown).result(timeout_s)
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self.stopped.set()

    def _shutdown(self) -> None:
        self.worker.stop_tasks(sorted(self.worker.tasks))
        for name in sorted(self.worker.connector_targets()):
            self.worker.stop_connector(name)

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the herder thread, after what is already queued."""
        if self._stopping.is_set():
            failed: concurrent.futures.Future[T] = concurrent.futures.Future()
            failed.set_exception(ConnectRestException(503, "The worker is shutting down"))
            return failed
        return self._executor.submit(fn)

    # -- the loop --------------------------------------------------------------------------

    def tick(self) -> None:
        self._handle_events()
        for name, running in self.worker.connectors.items():
            if running.take_reconfiguration_request():
                self._reconfigure.add(name)
        self._reconfigure_connectors()
        self._handle_events()

    def _handle_events(self) -> None:
        events = self.configs.take_events()
        if not events:
            return
        snapshot = self.configs.snapshot()
        for event in events:
            if isinstance(event, ConnectorChanged):
                name = event.connector
                new_config = snapshot.connector_configs.get(name)
                running = self.worker.connector_config(name)
                if running is not None and new_config is not None and new_config != running:
                    target = self.worker.connector_targets()[name]
                    self._stop_connector(name)
                    self._start_connector(name, new_config, target)
        self._apply_plan()

    def _owned(self) -> Work:
        snapshot = self.configs.snapshot()
        tasks = [t for c in snapshot.connectors() for t in snapshot.tasks(c)]
        return Work.of(snapshot.connectors(), tasks)

    def _apply_plan(self) -> None:
        snapshot = self.configs.snapshot()
        local = LocalState(self.worker.connector_targets(), self.worker.running_tasks())
        steps = plan(self._owned(), snapshot, local)
        self.worker.stop_tasks(steps.stop_tasks)
        for name in steps.stop_connectors:
            self._stop_connector(name)
        for name, target in steps.start_connectors:
            self._start_connector(name, snapshot.connector_configs[name], target)
        for name, target in steps.transition_connectors:
            previous = self.worker.connector_targets().get(name)
            if TargetState.STOPPED in (target, previous):
                self._stop_connector(name)
                self._start_connector(name, snapshot.connector_configs[name], target)
            else:
                self.worker.transition_connector(name, target)
                if target is TargetState.STARTED:
                    self._reconfigure.add(name)
        for task, target in steps.start_tasks:
            self.worker.start_task(
                task, snapshot.connector_configs[task.connector],
                dict(snapshot.task_configs[task]), target,
            )  # fmt: skip
        for task, target in steps.transition_tasks:
            self.worker.transition_task(task, target)
        # Statuses of what no longer exists go, as the distributed leader removes them.
        self.statuses.write(
            self.statuses.deleted(
                snapshot.connectors, lambda c: [t.task for t in snapshot.tasks(c)]
            ),
            WRITE_TIMEOUT_S,
        )

    def _start_connector(self, name: str, config: Mapping[str, str], target: TargetState) -> None:
        try:
            started = self.worker.start_connector(name, config, target)
        except Exception as exc:
            log.warning("connector %s failed to start: %s", name, exc)
            self.worker.report_failure(
                ConnectorStatus(name, State.FAILED, self.worker_id, 0, _trace(exc))
            )
            return
        if started and target is TargetState.STARTED:
            self._reconfigure.add(name)

    def _stop_connector(self, name: str) -> None:
        self.worker.stop_connector(name)
        self._reconfigure.discard(name)

    def _reconfigure_connectors(self) -> None:
        """Store new task configs of the connectors that generated different ones."""
        targets = self.worker.connector_targets()
        snapshot = self.configs.snapshot()
        for name in sorted(self._reconfigure):
            self._reconfigure.discard(name)
            config = snapshot.connector_configs.get(name)
            running = self.worker.connectors.get(name)
            if targets.get(name) is not TargetState.STARTED or running is None or config is None:
                continue
            if not running.running:
                continue
            try:
                configs = self.worker.connector_task_configs(
                    name, int(config.get("tasks.max", "1"))
                )
            except Exception as exc:
                log.warning("connector %s failed to generate task configs: %s", name, exc)
                self.worker.report_failure(
                    ConnectorStatus(name, State.FAILED, self.worker_id, 0, _trace(exc))
                )
                continue
            stored = [dict(snapshot.task_configs[t]) for t in snapshot.tasks(name)]
            if name in snapshot.inconsistent or task_configs_changed(stored, configs):
                self.configs.write(task_config_records(name, configs))

    # -- what the operations do on the herder thread -----------------------------------------

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> RestartPlan:
        snapshot = self.configs.snapshot()
        steps = restart_plan(self.statuses.state, name, include_tasks, only_failed)
        targets = self.worker.connector_targets()
        if steps.restart_connector and name in targets:
            self.worker.statuses.put(ConnectorStatus(name, State.RESTARTING, self.worker_id, 0))
            self._stop_connector(name)
            self._start_connector(name, snapshot.connector_configs[name], targets[name])
        for number in steps.tasks:
            task = ConnectorTaskId(name, number)
            if task in self.worker.tasks:
                self.worker.statuses.put(
                    TaskStatus(name, number, State.RESTARTING, self.worker_id, 0)
                )
                self.restart_task(task)
        return steps

    def restart_task(self, task: ConnectorTaskId) -> None:
        snapshot = self.configs.snapshot()
        if task not in snapshot.task_configs:
            raise ConnectRestException(404, f"Task {task} not found")
        target = snapshot.target_state(task.connector) or TargetState.STARTED
        self.worker.stop_task(task)
        self.worker.start_task(
            task,
            snapshot.connector_configs[task.connector],
            dict(snapshot.task_configs[task]),
            target,
        )

    def connector_instance(self, name: str) -> Any:
        config = self.configs.snapshot().connector_configs[name]
        return self.plugins.connector_class(config["connector.class"])()


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
