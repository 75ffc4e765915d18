"""The distributed herder (Kafka Connect's ``DistributedHerder``): one thread that ties
a worker to its cluster.

Each tick it:

- rejoins the group when needed (incremental cooperative: the leader runs the assignor
  on what members report; each member adds what it is assigned and stops what is
  revoked; a revocation is followed by a rejoin);
- reads the three internal topics, and the config topic to its end before acting on an
  assignment;
- carries out ``worker_plan.plan``: the :class:`Worker` starts, stops and transitions
  connectors and tasks, and is the only record of what runs here;
- has connectors generate task configs where they run; the leader writes them, a
  follower sends them to the leader off this thread (``task_config_sender``);
- serves the requests the REST API queued (``requests``: writes wait for a settled
  group and run on the leader; elsewhere the REST layer forwards them);
- as the leader, does the leader's duties (``leader``).

A separate thread heartbeats, so slow task stops cost no membership. KIP-618 task
starts are in ``fenced_task_starts``, the leader's fencing rounds in ``leader_fencing``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import ssl
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TypeVar

from oncelog.client.retry import is_retriable
from oncelog.connect.api.errors import ConnectRestException, RetriableException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.connect_protocol import ConnectProtocolVersion
from oncelog.connect.distributed.fenced_task_starts import FencedTaskStarts, FencingHooks
from oncelog.connect.distributed.fencing_requests import FencingRequests
from oncelog.connect.distributed.group import WorkerGroup
from oncelog.connect.distributed.leader import Leader
from oncelog.connect.distributed.leader_fencing import Fencer
from oncelog.connect.distributed.membership import (
    COORDINATOR_ERRORS,
    REJOIN_ERRORS,
    ConnectGroupMember,
    MembershipError,
)
from oncelog.connect.distributed.requests import Kind, RequestQueue
from oncelog.connect.distributed.restarts import Restarts
from oncelog.connect.distributed.task_reconfiguration import TaskReconfiguration
from oncelog.connect.runtime.loggers import Loggers, parse_level
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.work import Work
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)
from oncelog.connect.runtime.worker_plan import LocalState, plan
from oncelog.connect.storage.config_state import (
    ConnectorChanged,
    LoggerLevelChanged,
    RestartRequested,
    TasksChanged,
)
from oncelog.connect.storage.config_store import ConfigStore
from oncelog.connect.storage.offset_store import OffsetStore
from oncelog.connect.storage.status_records import ConnectorStatus, State, TaskStatus
from oncelog.connect.storage.status_store import StatusStore

log = logging.getLogger(__name__)

T = TypeVar("T")

READ_TIMEOUT_S = 30.0


def _ms(config: WorkerConfig, key: str, default: int) -> int:
    """A client setting the worker passes on (a string, unset by default), with Kafka's
    client default."""
    value = config.get(key)
    return int(value) if value not in (None, "") else default


def _transient(exc: BaseException) -> bool:
    """A failure that the next attempt may not meet: the broker unreachable or restarting,
    the coordinator moved or loading, a rebalance under way."""
    if isinstance(exc, MembershipError):
        return exc.code in COORDINATOR_ERRORS or exc.code in REJOIN_ERRORS
    return isinstance(exc, (OSError, RetriableException)) or is_retriable(exc)


class Herder:
    def __init__(
        self,
        config: WorkerConfig,
        plugins: PluginRegistry,
        url: str,
        *,
        protocol: ConnectProtocolVersion,
        member: ConnectGroupMember,
        configs: ConfigStore,
        statuses: StatusStore,
        offsets: OffsetStore,
        worker: Worker,
        fence_producers: Fencer,
        exactly_once: bool,
        group_id: str,
        loggers: Loggers,
        rest_ssl: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        # TLS for the internal requests this worker sends others (None: the default).
        self.rest_ssl = rest_ssl
        self.plugins = plugins
        self.url = url
        self.worker_id = url.split("://", 1)[-1].rstrip("/")
        self.protocol = protocol
        self.member = member
        self.configs = configs
        self.statuses = statuses
        self.offsets = offsets
        self.worker = worker
        self.clock = clock
        self.exactly_once = exactly_once
        self.loggers = loggers
        self.requests = RequestQueue()
        self.joined = threading.Event()
        self.stopped = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.group = WorkerGroup(member, protocol, url, config, configs, clock)
        self.reconfiguration = TaskReconfiguration(self)
        self.leader = Leader(config, protocol, configs.writer, statuses, configs.snapshot, clock)
        self.fencing = FencingRequests(self, group_id, fence_producers)
        self.fenced_starts = FencedTaskStarts(
            FencingHooks(
                snapshot=configs.snapshot,
                read_config_to_end=configs.read_to_end,
                owned_tasks=lambda: self.group.owned.tasks,
                request_fencing=self.fencing.request_fencing,
                start_task=self._start_fenced_task,
                task_failed=self._task_failed,
                generation_of=self._generation_of,
                on_herder_thread=self._run_on_herder_thread,
            )
        )
        self.restarts = Restarts(self)
        if exactly_once:
            # KIP-618 startup steps 6-7: re-check the task's generation once its
            # transactional producer has fenced its predecessors.
            worker.before_first_poll = self.fenced_starts.before_first_poll

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self._thread.start()
        threading.Thread(target=self._heartbeats, name="herder-heartbeat", daemon=True).start()

    def _heartbeats(self) -> None:
        """Heartbeats on their own thread, so stopping slow tasks (up to the graceful
        timeout each) does not cost the worker its membership."""
        interval_s = self.config.settings.heartbeat_interval_ms / 1000
        while not self._stopping.wait(interval_s):
            generation = self.member.generation
            if self.group.rebalancing or self.group.need_rejoin or generation < 0:
                continue
            try:
                code = self.member.heartbeat()
            except Exception as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            # A reply for a generation already replaced says nothing about the new one.
            if code.value != 0 and self.member.generation == generation:
                log.info("heartbeat: %s; rejoining", code.name)
                self.group.need_rejoin = True

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop tasks and connectors (each within the graceful timeout) and leave the group."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            self.configs.start()
            self.statuses.start()
            self.offsets.start()
            retry_s = first_retry_s = _ms(self.config, "retry.backoff.ms", 100) / 1000
            max_retry_s = max(first_retry_s, _ms(self.config, "retry.backoff.max.ms", 1000) / 1000)
            while not self._stopping.is_set():
                try:
                    self.tick()
                    retry_s = first_retry_s
                except Exception as exc:
                    self.group.need_rejoin = True
                    self.group.rebalancing = True
                    if _transient(exc):
                        # The coordinator is restarting, moving or unreachable: Kafka's
                        # worker coordinator retries after retry.backoff.ms, doubling up to
                        # retry.backoff.max.ms (worker.unsync.backoff.ms is for a worker
                        # that could not catch up with the config topic).
                        log.warning("%s; joining again in %.0f ms", exc, retry_s * 1000)
                        self._stopping.wait(retry_s)
                        retry_s = min(max_retry_s, retry_s * 2)
                        continue
                    log.exception("herder tick failed; rejoining")
                    self._stopping.wait(self.config.settings.worker_unsync_backoff_ms / 1000)
        except Exception:
            log.exception("herder failed")
        finally:
            self._shutdown()
            self.stopped.set()

    def _shutdown(self) -> None:
        self.reconfiguration.close()
        self.worker.stop_tasks(sorted(self.worker.tasks))
        for name in sorted(self.worker.connector_targets()):
            self.worker.stop_connector(name)
        try:
            self.member.leave()
        except Exception:
            log.warning("leaving the group failed", exc_info=True)
        self.member.close()
        self.configs.writer.relinquish()
        self.statuses.flush(5)
        self.requests.fail_all(ConnectRestException(503, "The worker is shutting down"))

    # -- requests from the REST API --------------------------------------------------------

    def submit(self, fn: Callable[[], T], kind: Kind = Kind.WRITE) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the herder thread when ``kind`` allows (``requests``)."""
        return self.requests.submit(fn, kind)

    def _run_on_herder_thread(self, fn: Callable[[], None]) -> None:
        if threading.current_thread() is self._thread:
            fn()
            return
        self.submit(fn, Kind.LOCAL).result(READ_TIMEOUT_S * 2)

    # -- the loop --------------------------------------------------------------------------

    def tick(self) -> None:
        self.group.check_schedule()
        if self.configs.take_write_failure():
            self.group.need_rejoin = True  # fenced by a newer leader: learn who leads
        if self.group.need_rejoin:
            self._rebalance()
        self.statuses.poll(0)
        self.offsets.poll(0)
        self.configs.poll(0.05)
        self._handle_events()
        if self.fenced_starts.start_fenced():
            self._apply_plan()
        if self.group.is_leader and not self.group.need_rejoin:
            self.leader.tick()
        self.reconfiguration.run()
        self.requests.serve(self.group.view())
        self._handle_events()

    def read_config_to_end(self) -> None:
        self.configs.read_to_end()

    # -- rebalancing -----------------------------------------------------------------------

    def _rebalance(self) -> None:
        if not self.group.rebalance(self._stop_revoked):
            return
        self.configs.drop_events()  # the plan below covers them
        if self.group.is_leader:
            self.leader.elected()
        else:
            self.leader.demoted()
        self._apply_plan()
        self.joined.set()

    def _stop_revoked(self, revoked: Work) -> None:
        self.worker.stop_tasks(sorted(t for t in revoked.tasks if t in self.worker.tasks))
        for task in revoked.tasks:
            self.fenced_starts.forget(task)
        for name in sorted(revoked.connectors):
            if name in self.worker.connectors:
                self._stop_connector(name)

    # -- carrying out the plan -------------------------------------------------------------

    def _local_state(self) -> LocalState:
        return LocalState(
            self.worker.connector_targets(),
            {**self.worker.running_tasks(), **self.fenced_starts.reserved},
        )

    def _apply_plan(self) -> None:
        snapshot = self.configs.snapshot()
        steps = plan(self.group.owned, snapshot, self._local_state())
        if steps.is_empty():
            return
        self.worker.stop_tasks([t for t in steps.stop_tasks if t in self.worker.tasks])
        for task in steps.stop_tasks:
            self.fenced_starts.forget(task)
        for name in steps.stop_connectors:
            self._stop_connector(name)
        for name, target in steps.start_connectors:
            self._start_connector(name, snapshot.connector_configs[name], target)
        for name, target in steps.transition_connectors:
            self._transition_connector(name, snapshot.connector_configs[name], target)
        if steps.start_tasks:
            self.offsets.read_to_end()
        for task, target in steps.start_tasks:
            self._start_task(
                task,
                snapshot.connector_configs[task.connector],
                snapshot.task_configs[task],
                target,
            )
        for task, target in steps.transition_tasks:
            if task in self.worker.tasks:
                self.worker.transition_task(task, target)
            else:  # still awaiting its fencing
                self.fenced_starts.transition(task, target)

    def _start_connector(self, name: str, config: Mapping[str, str], target: TargetState) -> None:
        try:
            started = self.worker.start_connector(name, config, target)
        except Exception as exc:
            log.warning("connector %s failed to start: %s", name, exc)
            self.connector_failed(name, exc)
            return
        if started and target is TargetState.STARTED:
            self.reconfiguration.request(name)

    def _stop_connector(self, name: str) -> None:
        self.worker.stop_connector(name)
        self.reconfiguration.forget(name)

    def _transition_connector(
        self, name: str, config: Mapping[str, str], target: TargetState
    ) -> None:
        previous = self.worker.connector_targets().get(name)
        if target is TargetState.STOPPED or previous is TargetState.STOPPED:
            self._stop_connector(name)
            self._start_connector(name, config, target)
            return
        self.worker.transition_connector(name, target)
        if target is TargetState.STARTED:
            self.reconfiguration.request(name)

    def _start_task(
        self,
        task: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        target: TargetState,
    ) -> None:
        if self.exactly_once and self._is_source(connector_config):
            self.fenced_starts.reserve(task, task_config, target)  # KIP-618 steps 1-2
            return
        self.worker.start_task(task, connector_config, dict(task_config), target)

    def _start_fenced_task(
        self,
        task: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: dict[str, str],
        target: TargetState,
        generation: int,
    ) -> None:
        self.worker.start_task(task, connector_config, task_config, target, generation)

    def _generation_of(self, task: ConnectorTaskId) -> int | None:
        running = self.worker.running_tasks().get(task)
        return None if running is None else running.generation

    def _is_source(self, connector_config: Mapping[str, str]) -> bool:
        return self.plugins.connector_type(connector_config) == "source"

    def _handle_events(self) -> None:
        events = self.configs.take_events()
        if not events:
            return
        snapshot = self.configs.snapshot()
        restarts = []
        for event in events:
            if isinstance(event, TasksChanged):
                self.fencing.rounds.cancel(event.connector)
            if isinstance(event, ConnectorChanged):
                name = event.connector
                new_config = snapshot.connector_configs.get(name)
                running = self.worker.connector_config(name)
                if running is not None and new_config is not None and new_config != running:
                    target = self.worker.connector_targets()[name]
                    self._stop_connector(name)
                    self._start_connector(name, new_config, target)
            elif isinstance(event, RestartRequested):
                restarts.append(event.request)
            elif isinstance(event, LoggerLevelChanged):
                level = parse_level(event.level)
                if level is not None:
                    log.info("cluster-wide log level: %s -> %s", event.namespace, event.level)
                    self.loggers.set_level(event.namespace, level)
        self._apply_plan()
        for request in restarts:
            self.restarts.carry_out(request)
        if self.group.configuration_changed():
            log.info("the configured connectors or tasks changed; rejoining")
            self.group.need_rejoin = True

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        self.fencing.check_internal_request(body, headers)

    def fence_zombies(self, name: str) -> concurrent.futures.Future[None]:
        return self.fencing.fence_zombies(name)

    # -- statuses --------------------------------------------------------------------------

    def _task_failed(self, task: ConnectorTaskId, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.worker.report_failure(
            TaskStatus(
                task.connector, task.task, State.FAILED, self.worker_id,
                self.member.generation, trace,
            )
        )  # fmt: skip

    def connector_failed(self, name: str, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.worker.report_failure(
            ConnectorStatus(name, State.FAILED, self.worker_id, self.member.generation, trace)
        )
