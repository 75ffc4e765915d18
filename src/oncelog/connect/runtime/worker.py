"""The worker: runs connector instances and task loops on threads, and reports their
statuses. The herder decides what runs here (``worker_plan``); the worker carries it
out.

A task's converters come from the connector config (``key.converter`` and its
``key.converter.*`` settings) or else the worker config, as in Kafka. Its clients
come from a :class:`ClientFactory`, which the client layer implements. Each task runs
its loop on its own thread:

- it reports RUNNING once started;
- it reports PAUSED while its target state is PAUSED, and then no records move;
- it reports FAILED with the error's traceback when the loop raises;
- it reports UNASSIGNED when it is stopped.

Stopping waits up to ``task.shutdown.graceful.timeout.ms`` and abandons a task that
does not stop in time, as Kafka does.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oncelog.connect.api.connector import Config
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.abstract_source_task import AbstractWorkerSourceTask
from oncelog.connect.runtime.exactly_once_source_task import (
    ExactlyOnceWorkerSourceTask,
)
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.task_loops import TaskLoops
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)
from oncelog.connect.runtime.worker_connector import WorkerConnector
from oncelog.connect.runtime.worker_services import ClientFactory, StatusSink
from oncelog.connect.runtime.worker_sink_task import (
    WorkerSinkTask,
)
from oncelog.connect.storage.offsets import OffsetsView
from oncelog.connect.storage.status_records import ConnectorStatus, State, TaskStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunningTask:
    """What a task runs with: its target state, its config and (exactly-once source
    tasks, KIP-618) the task-config generation it was started for."""

    state: TargetState
    config: Mapping[str, str]
    generation: int | None = None


@dataclass
class _TaskRunner:
    id: ConnectorTaskId
    loop: AbstractWorkerSourceTask | WorkerSinkTask
    target: TargetState
    config: Config
    generation: int | None
    thread: threading.Thread | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    state_changed: threading.Event = field(default_factory=threading.Event)
    failure: str | None = None
    # Guards ``target`` and ``started`` so the thread's first status and a concurrent
    # transition cannot be reported out of order.
    status_lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False


class Worker:
    def __init__(
        self,
        worker_id: str,
        config: WorkerConfig,
        plugins: PluginRegistry,
        clients: ClientFactory,
        offsets: OffsetsView,
        statuses: StatusSink,
        generation: Callable[[], int] = lambda: 0,
        *,
        topic_tracking: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.worker_id = worker_id
        self.config = config
        self.plugins = plugins
        self.clients = clients
        self.offsets = offsets
        self.statuses = statuses
        self.generation = generation
        self.topic_tracking = topic_tracking
        self.clock = clock
        # The one record of what runs here: connector instances with their target
        # states and configs, and task runners with theirs.
        self.loops = TaskLoops(config, plugins, clients, offsets, statuses, clock, topic_tracking)
        self.connectors: dict[str, WorkerConnector] = {}
        self._connector_targets: dict[str, TargetState] = {}
        self.tasks: dict[ConnectorTaskId, _TaskRunner] = {}
        # Called for an exactly-once source task once its transactional producer is
        # initialized and before the task starts (KIP-618 startup steps 5-7: re-read
        # the config topic, abandon the task if a newer task generation exists by
        # raising). The herder sets it.
        self.before_first_poll: Callable[[ConnectorTaskId], None] | None = None

    # -- connectors ------------------------------------------------------------------------

    def start_connector(
        self, name: str, connector_config: Mapping[str, str], target: TargetState
    ) -> bool:
        """Start (STARTED/PAUSED) or register as stopped (STOPPED) a connector instance."""
        connector_cls = self.plugins.connector_class(connector_config["connector.class"])
        instance = WorkerConnector(name, connector_cls())
        instance.config = dict(connector_config)
        self.connectors[name] = instance
        self._connector_targets[name] = target
        if target is TargetState.STOPPED:
            self._connector_status(name, State.STOPPED)
            return True
        if not instance.start(connector_config):
            self._connector_status(name, State.FAILED, _trace(instance.failure))
            return False
        self._connector_status(name, _status_of(target))
        return True

    def connector_task_configs(self, name: str, max_tasks: int) -> list[Config]:
        return self.connectors[name].task_configs(max_tasks)

    def transition_connector(self, name: str, target: TargetState) -> None:
        """PAUSED <-> STARTED: the connector instance keeps running, as in Kafka."""
        self._connector_targets[name] = target
        self._connector_status(name, _status_of(target))

    def stop_connector(self, name: str) -> None:
        instance = self.connectors.pop(name, None)
        self._connector_targets.pop(name, None)
        if instance is not None:
            instance.stop()
            self._connector_status(name, State.UNASSIGNED)

    def connector_targets(self) -> dict[str, TargetState]:
        """The connectors on this worker (running, paused or stopped) and their targets."""
        return dict(self._connector_targets)

    def connector_config(self, name: str) -> dict[str, str] | None:
        instance = self.connectors.get(name)
        return None if instance is None else dict(instance.config)

    def running_tasks(self) -> dict[ConnectorTaskId, RunningTask]:
        return {t: RunningTask(r.target, r.config, r.generation) for t, r in self.tasks.items()}

    # -- tasks -----------------------------------------------------------------------------

    def start_task(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Config,
        target: TargetState,
        generation: int | None = None,
    ) -> bool:
        """Build the task's loop and start its thread; False (status FAILED) if it cannot
        be built (unknown class, bad converter). The task's own start runs on its thread,
        as in Kafka: an exactly-once task's producer initialization can wait for its
        predecessor's transaction, which must not hold the herder."""
        try:
            loop = self.loops.build(task_id, connector_config, task_config, self.before_first_poll)
        except Exception as exc:
            self._task_status(task_id, State.FAILED, _trace(exc))
            return False
        runner = _TaskRunner(task_id, loop, target, dict(task_config), generation)
        self.tasks[task_id] = runner
        runner.thread = threading.Thread(
            target=self._run, args=(runner,), name=f"task-{task_id}", daemon=True
        )
        runner.thread.start()
        return True

    def task_metrics(self, task_id: ConnectorTaskId) -> dict[str, Any] | None:
        """The metrics of a task running here (None if it does not run here)."""
        runner = self.tasks.get(task_id)
        if runner is None:
            return None
        loop = runner.loop
        out: dict[str, Any] = dict(vars(loop.metrics))
        if isinstance(loop, ExactlyOnceWorkerSourceTask):
            out.update(loop.transactions.as_dict())
            out["transactions-aborted"] = loop.aborted_transactions
        return out

    def _close_failed(self, runner: _TaskRunner) -> None:
        """Close a failed task's loop as Kafka's WorkerTask does (its ``finally``): a sink
        task's consumer leaves the group (else it kept its partitions from the restarted
        task until max.poll.interval.ms); an at-least-once source commits the offsets of
        acknowledged records; an exactly-once source commits nothing (its open
        transaction is aborted); the task is stopped. The first failure is the one
        reported."""
        try:
            runner.loop.close(failed=True)
        except Exception:
            log.warning("%s: closing the failed task failed", runner.id, exc_info=True)

    def _run(self, runner: _TaskRunner) -> None:
        try:
            runner.loop.start()
        except Exception as exc:
            if not runner.stopping.is_set():  # a start cut short by a stop is no failure
                runner.failure = _trace(exc)
                self._task_status(runner.id, State.FAILED, runner.failure)
            self._close_failed(runner)
            return
        with runner.status_lock:
            runner.started = True
            if not runner.stopping.is_set():  # a stop during start() reports UNASSIGNED
                self._task_status(runner.id, _status_of(runner.target))
        try:
            was_paused = False
            while not runner.stopping.is_set():
                paused = runner.target is TargetState.PAUSED
                if isinstance(runner.loop, WorkerSinkTask):
                    # A paused sink keeps polling (with its partitions paused) to stay in its group.
                    runner.loop.paused_by_target = paused
                    runner.loop.iterate()
                    continue
                if paused != was_paused:
                    # On the task's thread, as Kafka's WorkerTask calls onPause/onResume.
                    runner.loop.on_pause() if paused else runner.loop.on_resume()
                    was_paused = paused
                if paused:
                    runner.state_changed.wait(0.5)
                    runner.state_changed.clear()
                else:
                    runner.loop.iterate()
        except Exception as exc:
            if runner.stopping.is_set():
                # Kafka's WorkerTask.doRun: an error after the stop was asked for is logged,
                # not reported; the stop reports the task UNASSIGNED (a restart's new
                # instance must not be shown FAILED by its predecessor's last error).
                log.warning("%s: the task failed while stopping", runner.id, exc_info=True)
                self._close_failed(runner)
                return
            runner.failure = _trace(exc)
            self._task_status(runner.id, State.FAILED, runner.failure)
            self._close_failed(runner)
            return
        try:
            runner.loop.close()
        except Exception as exc:
            runner.failure = _trace(exc)
            self._task_status(runner.id, State.FAILED, runner.failure)

    def transition_task(self, task_id: ConnectorTaskId, target: TargetState) -> None:
        runner = self.tasks[task_id]
        with runner.status_lock:
            runner.target = target
            if runner.started:  # else the thread reports it once the task has started
                self._task_status(task_id, _status_of(target))
        runner.state_changed.set()

    def stop_task(self, task_id: ConnectorTaskId) -> bool:
        """Stop a task and wait for it up to the graceful timeout; False if abandoned."""
        return self.stop_tasks([task_id])

    def stop_tasks(self, task_ids: Iterable[ConnectorTaskId]) -> bool:
        """Stop tasks together, waiting for all of them within one graceful timeout (as
        Kafka does); False if any was abandoned."""
        runners = [r for r in (self.tasks.pop(t, None) for t in task_ids) if r is not None]
        for runner in runners:
            runner.stopping.set()
            runner.state_changed.set()
            runner.loop.stop()
        deadline = time.monotonic() + self.config.settings.task_shutdown_timeout_ms / 1000
        stopped = True
        for runner in runners:
            assert runner.thread is not None
            runner.thread.join(max(0.0, deadline - time.monotonic()))
            stopped = stopped and not runner.thread.is_alive()
            if runner.failure is None:
                self._task_status(runner.id, State.UNASSIGNED)
        return stopped

    def task_failure(self, task_id: ConnectorTaskId) -> str | None:
        runner = self.tasks.get(task_id)
        return None if runner is None else runner.failure

    # -- statuses --------------------------------------------------------------------------

    def _connector_status(self, name: str, state: State, trace: str | None = None) -> None:
        self._report(ConnectorStatus(name, state, self.worker_id, self.generation(), trace))

    def _task_status(
        self, task_id: ConnectorTaskId, state: State, trace: str | None = None
    ) -> None:
        self._report(
            TaskStatus(
                task_id.connector, task_id.task, state, self.worker_id, self.generation(), trace
            )
        )

    def report_failure(self, status: ConnectorStatus | TaskStatus) -> None:
        """A failure found outside a running loop (a failed start, a failed fencing)."""
        self._report(status)

    def _report(self, status: ConnectorStatus | TaskStatus) -> None:
        if status.state in (State.FAILED, State.UNASSIGNED):
            self.statuses.put_safe(status)
        else:
            self.statuses.put(status)


def _status_of(target: TargetState) -> State:
    return State.PAUSED if target is TargetState.PAUSED else State.RUNNING


def _trace(error: BaseException | None) -> str | None:
    if error is None:
        return None
    return "".join(traceback.format_exception(error))
