"""The distributed herder: one thread that ties a worker to its cluster.

Each tick it:

- rejoins the group when needed (incremental cooperative: the leader runs
  ``assignor.assign`` on what members report, and each member adds what it is
  assigned and stops what is revoked; a revocation is followed by a rejoin);
- reads the config topic to the end before acting on an assignment, and keeps
  reading the three internal topics;
- carries out ``worker_plan.plan`` (start/stop/transition connectors and tasks);
- (a separate thread heartbeats, so slow task stops cost no membership);
- runs the requests the REST API queued (:meth:`submit`). Requests that change the
  cluster's configuration are served by the leader only, the one writer of the config
  topic; elsewhere they raise :class:`NotLeaderError` and the REST layer forwards them.

Connectors generate their task configs where they run; the leader writes them (a
follower sends them to the leader's internal ``PUT /connectors/{c}/tasks``, signed
with the session key). The leader's writes go through ``config_writer`` (transactional
from ``exactly.once.source.support=preparing`` on, so a zombie leader cannot write).

KIP-618 zombie fencing (``zombie_fencing`` decides, this module acts):

- with ``exactly.once.source.support=enabled``, a source task starts only once a
  task-count record follows its connector's latest task configs. The worker asks the
  leader for a round of fencing (``fence_zombies`` on the leader itself, else the
  leader's signed ``PUT /connectors/{c}/fence``), reads the config topic to its end,
  and starts the task if its generation is still the latest; if the request fails the
  task is FAILED with the error as its trace;
- the leader's rounds (``leader_fencing``) fence the previous generation's producers
  off the herder thread (``Admin.fence_producers`` with the connector's admin
  settings), then write the task-count record on the herder thread, unless new task
  configs arrived meanwhile (409). Concurrent requests for one connector share a round;
- after the task's transactional producer is initialized, the task calls
  :meth:`Herder.before_first_poll` (startup steps 6-7): the config topic is read to its
  end and the task must still be of the latest generation and assigned here.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from oncelog.client.retry import is_retriable
from oncelog.connect.api.connector import SourceConnector
from oncelog.connect.api.errors import (
    ConfigException,
    ConnectException,
    ConnectRestException,
    RetriableException,
)
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed import (
    internal_requests,
    leader_duties,
    request_signing,
    zombie_fencing,
)
from oncelog.connect.distributed.assignor import EMPTY, AssignorState, Work, configured_work
from oncelog.connect.distributed.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    ConnectProtocolVersion,
    WorkerState,
    decode_assignment,
    join_protocols,
)
from oncelog.connect.distributed.group_assignment import leader_assignments
from oncelog.connect.distributed.leader_fencing import LeaderFencing
from oncelog.connect.distributed.membership import (
    COORDINATOR_ERRORS,
    REJOIN_ERRORS,
    ConnectGroupMember,
    MembershipError,
)
from oncelog.connect.distributed.worker_plan import LocalState, RunningTask, plan
from oncelog.connect.kafka_io.internal_topics import (
    TopicLogConsumer,
    TopicWriter,
    TransactionalTopicWriter,
)
from oncelog.connect.kafka_io.settings import client_config
from oncelog.connect.kafka_io.task_clients import ProducerFencer, TaskClients
from oncelog.connect.runtime import client_configs
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.restart_plan import restart_plan
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import (
    CONNECT_PROTOCOL,
    GROUP_ID,
    HEARTBEAT_INTERVAL_MS,
    REBALANCE_TIMEOUT_MS,
    SCHEDULED_REBALANCE_MAX_DELAY_MS,
    SESSION_TIMEOUT_MS,
    WORKER_SYNC_TIMEOUT_MS,
    WORKER_UNSYNC_BACKOFF_MS,
    WorkerConfig,
)
from oncelog.connect.runtime.worker_connector import task_configs_changed
from oncelog.connect.storage import offset_records, status_records
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_records import ConfigRecord, RestartRequestRecord
from oncelog.connect.storage.config_state import (
    ConfigEvent,
    ConnectorChanged,
    RestartRequested,
    TasksChanged,
)
from oncelog.connect.storage.config_writer import ConfigWriter, PrivilegedLogWriter
from oncelog.connect.storage.internal_log import InternalTopicReader, LogRecord
from oncelog.connect.storage.status_records import ConnectorStatus, StatusRecord, TaskStatus

log = logging.getLogger(__name__)

T = TypeVar("T")

KEY_TTL_MS = "inter.worker.key.ttl.ms"
SIGNATURE_ALGORITHM = "inter.worker.signature.algorithm"
VERIFICATION_ALGORITHMS = "inter.worker.verification.algorithms"
KEY_ALGORITHM = "inter.worker.key.generation.algorithm"
KEY_SIZE = "inter.worker.key.size"
READ_TIMEOUT_S = 30.0


class NotLeaderError(ConnectException):
    """The request must be served by the leader, at ``leader_url`` (None: unknown)."""

    def __init__(self, leader_url: str | None) -> None:
        super().__init__(f"This worker is not the leader; the leader is {leader_url}")
        self.leader_url = leader_url


class RebalanceInProgress(ConnectRestException):
    def __init__(self) -> None:
        super().__init__(
            409,
            "Cannot complete request because of a conflicting operation (e.g. worker rebalance)",
        )


@dataclass
class _Request:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]
    leader_only: bool


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.plugins = plugins
        self.url = url
        self.worker_id = url.split("://", 1)[-1].rstrip("/")
        self.clock = clock
        topics = config.internal_topics()
        self.config_topic, self.offsets_topic, self.status_topic = (
            topics["config"][0],
            topics["offsets"][0],
            topics["status"][0],
        )
        shared = config.shared_client_config()
        self.state = ClusterState()
        self.protocol = ConnectProtocolVersion.from_config(str(config.get(CONNECT_PROTOCOL)))
        if self.protocol is ConnectProtocolVersion.EAGER:
            raise ConnectException(
                "connect.protocol=eager is not supported: this runtime rebalances incrementally "
                "(use compatible or sessioned)"
            )
        self.member = ConnectGroupMember(
            client_config(shared),
            str(config.get(GROUP_ID)),
            session_timeout_ms=config.get_int(SESSION_TIMEOUT_MS),
            rebalance_timeout_ms=config.get_int(REBALANCE_TIMEOUT_MS),
            client_id=f"connect-{self.worker_id}",
        )
        self._events: list[ConfigEvent] = []
        self.config_reader = InternalTopicReader(
            TopicLogConsumer(shared), self.config_topic, self._config_record
        )
        self.status_reader = InternalTopicReader(
            TopicLogConsumer(shared), self.status_topic, self._status_record
        )
        self.offsets_reader = InternalTopicReader(
            TopicLogConsumer(shared), self.offsets_topic, self._offset_record
        )
        self.group_id = str(config.get(GROUP_ID))
        self.exactly_once = zombie_fencing.exactly_once_source_support(config)
        privileged: Callable[[], PrivilegedLogWriter] | None = None
        if self.exactly_once.transactional_leader:
            leader_id = zombie_fencing.leader_transactional_id(self.group_id)
            privileged = lambda: TransactionalTopicWriter(shared, self.config_topic, leader_id)  # noqa: E731
        self.configs = ConfigWriter(
            TopicWriter(shared, self.config_topic),
            privileged,
            self._read_config_back,
            self.state.snapshot,
            on_write_failure=self._fenced_from_config_topic,
            timeout_s=READ_TIMEOUT_S,
        )
        self.status_writer = TopicWriter(shared, self.status_topic)
        self.offsets_writer = TopicWriter(shared, self.offsets_topic)
        self.worker = Worker(
            self.worker_id,
            config,
            plugins,
            TaskClients(config, self.offsets_topic),
            self.state.offsets_view,
            self._write_status,
            generation=lambda: self.member.generation,
        )
        if self.exactly_once.enabled:
            # KIP-618 startup steps 6-7: re-check the task's generation once its
            # transactional producer has fenced its predecessors.
            self.worker.before_first_poll = self.before_first_poll
        self.requests: queue.Queue[_Request] = queue.Queue()
        self.joined = threading.Event()
        self.stopped = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # Group state.
        self.owned: Work = EMPTY
        self.leader_id: str | None = None
        self.leader_url: str | None = None
        self.rebalancing = True
        self._need_rejoin = True
        self._rejoin_at: float | None = None
        self._last_generation = -1
        self._assignor = AssignorState()
        self._configured_at_assignment: Work = EMPTY
        # What runs here.
        self._connector_targets: dict[str, TargetState] = {}
        self._connector_configs: dict[str, dict[str, str]] = {}
        self._tasks: dict[ConnectorTaskId, RunningTask] = {}
        self._reconfigure: set[str] = set()
        # KIP-618: source tasks reserved here until their connector is fenced (task ->
        # generation), this worker's fencing requests per connector, and (leader) the
        # rounds of fencing under way.
        self._awaiting_fencing: dict[ConnectorTaskId, int] = {}
        self._fencing_requests: dict[str, concurrent.futures.Future[None]] = {}
        self.fencing = LeaderFencing(
            self.group_id,
            self.state.snapshot,
            self.read_config_to_end,
            self.configs.write_task_count,
            lambda fn: self.submit(fn, leader_only=False),
            self._fence_producers,
            self._require_leader,
        )
        # The generation each exactly-once source task was started for (read by
        # before_first_poll on the task's thread).
        self._started_generations: dict[ConnectorTaskId, int] = {}
        self._next_claim_at = 0.0

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self._thread.start()
        threading.Thread(target=self._heartbeats, name="herder-heartbeat", daemon=True).start()

    def _heartbeats(self) -> None:
        """Heartbeats on their own thread, so stopping slow tasks (up to the graceful
        timeout each) does not cost the worker its membership."""
        interval_s = self.config.get_int(HEARTBEAT_INTERVAL_MS) / 1000
        while not self._stopping.wait(interval_s):
            generation = self.member.generation
            if self.rebalancing or self._need_rejoin or generation < 0:
                continue
            try:
                code = self.member.heartbeat()
            except Exception as exc:
                log.warning("heartbeat failed: %s", exc)
                continue
            # A reply for a generation already replaced says nothing about the new one.
            if code.value != 0 and self.member.generation == generation:
                log.info("heartbeat: %s; rejoining", code.name)
                self._need_rejoin = True

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop tasks and connectors (each within the graceful timeout) and leave the group."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.member.member_id

    def _run(self) -> None:
        try:
            for reader in (self.config_reader, self.status_reader, self.offsets_reader):
                reader.start()
                reader.read_to_end(READ_TIMEOUT_S)
            self.state.config.caught_up = True
            self._events.clear()
            retry_s = first_retry_s = _ms(self.config, "retry.backoff.ms", 100) / 1000
            max_retry_s = max(first_retry_s, _ms(self.config, "retry.backoff.max.ms", 1000) / 1000)
            while not self._stopping.is_set():
                try:
                    self.tick()
                    retry_s = first_retry_s
                except Exception as exc:
                    self._need_rejoin = True
                    self.rebalancing = True
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
                    self._stopping.wait(self.config.get_int(WORKER_UNSYNC_BACKOFF_MS) / 1000)
        except Exception:
            log.exception("herder failed")
        finally:
            self._shutdown()
            self.stopped.set()

    def _shutdown(self) -> None:
        self.worker.stop_tasks(sorted(self._tasks))
        for name in sorted(self._connector_targets):
            self.worker.stop_connector(name)
        self._tasks.clear()
        self._connector_targets.clear()
        try:
            self.member.leave()
        except Exception:
            log.warning("leaving the group failed", exc_info=True)
        self.member.close()
        self.configs.relinquish()
        self.status_writer.flush(5)
        while not self.requests.empty():
            self.requests.get().future.set_exception(
                ConnectRestException(503, "The worker is shutting down")
            )

    # -- requests from the REST API --------------------------------------------------------

    def submit(
        self, fn: Callable[[], T], *, leader_only: bool = True
    ) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the herder thread; leader-only requests raise
        :class:`NotLeaderError` elsewhere and 409 during a rebalance."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.requests.put(_Request(fn, future, leader_only))
        return future

    def _serve_requests(self) -> None:
        while True:
            try:
                request = self.requests.get_nowait()
            except queue.Empty:
                return
            if not request.future.set_running_or_notify_cancel():
                continue
            try:
                if request.leader_only:
                    # As Kafka: not while a rebalance is under way or already needed.
                    if self.rebalancing or self._need_rejoin or self.leader_id is None:
                        raise RebalanceInProgress()
                    if not self.is_leader:
                        raise NotLeaderError(self.leader_url)
                request.future.set_result(request.fn())
            except BaseException as exc:
                request.future.set_exception(exc)

    # -- the loop --------------------------------------------------------------------------

    def tick(self) -> None:
        now = time.monotonic()
        if self._rejoin_at is not None and now >= self._rejoin_at:
            self._rejoin_at = None
            self._need_rejoin = True
        if self._need_rejoin:
            self._rebalance()
        self.status_reader.poll(0)
        self.offsets_reader.poll(0)
        self.config_reader.poll(0.05)
        if self._events:
            self._handle_events()
        self._start_fenced_tasks()
        if self.is_leader and not self._need_rejoin:
            self._claim_config_topic()
            if self.configs.claimed or not self.configs.transactional:
                self._leader_duties()
        self._reconfigure_connectors()
        self._serve_requests()

    def _config_record(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self._events.extend(self.state.apply_config(record.offset, record.key, record.value))
        except ConnectException as exc:
            log.warning("ignoring config record at %d: %s", record.offset, exc)

    def _status_record(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self.state.apply_status(record.key, record.value)
        except ConnectException as exc:
            log.warning("ignoring status record: %s", exc)

    def _offset_record(self, record: LogRecord) -> None:
        if record.key is None:
            return
        try:
            self.state.apply_offset(record.key, record.value)
        except ConnectException as exc:
            log.warning("ignoring offset record: %s", exc)

    def read_config_to_end(self) -> None:
        self.config_reader.read_to_end(READ_TIMEOUT_S)

    def _read_config_back(self) -> None:
        """After a write: read it back and act on it."""
        self.read_config_to_end()
        if self._events:
            self._handle_events()

    # -- rebalancing -----------------------------------------------------------------------

    def _rebalance(self) -> None:
        self.rebalancing = True
        log.info("joining the group (generation %d)", self.member.generation)
        snapshot = self.state.snapshot()
        current = ConnectAssignment(
            int(self.protocol),
            0,
            self.leader_id or "",
            self.leader_url or "",
            snapshot.offset,
            self.owned,
        )
        result = self.member.join(
            join_protocols(WorkerState(self.url, snapshot.offset, current), self.protocol)
        )
        version = ConnectProtocolVersion.from_name(result.protocol)
        assignments: dict[str, bytes] | None = None
        if result.is_leader:
            self.read_config_to_end()
            snapshot = self.state.snapshot()
            assignments, self._assignor = leader_assignments(
                version,
                result.leader_id,
                result.members,
                snapshot.offset,
                configured_work(snapshot.task_counts_by_connector()),
                self._assignor,
                now_ms=int(self.clock() * 1000),
                max_delay_ms=self.config.get_int(SCHEDULED_REBALANCE_MAX_DELAY_MS),
                generation=result.generation,
                last_completed_generation=self._last_generation,
            )
        try:
            raw_assignment = self.member.sync(assignments)
        except MembershipError as exc:
            if exc.code not in REJOIN_ERRORS and exc.code not in COORDINATOR_ERRORS:
                raise
            # Another member joined (or the generation moved on) between our join and
            # sync: join again at once, as Kafka's coordinator does. Treating it as a
            # failed tick would wait out worker.unsync.backoff.ms (5 minutes).
            log.info("SyncGroup: %s; joining again", exc.code.name)
            self._need_rejoin = True
            return
        assignment = decode_assignment(raw_assignment)
        log.info(
            "generation %d: assigned %s, revoked %s, delay %d ms, config offset %d",
            result.generation,
            sorted(map(str, assignment.assigned.tasks)),
            sorted(map(str, assignment.revoked.tasks)),
            assignment.delay_ms,
            assignment.config_offset,
        )
        self.leader_id, self.leader_url = assignment.leader, assignment.leader_url
        self._need_rejoin = False
        if assignment.error == CONFIG_MISMATCH:
            self.read_config_to_end()
            self._need_rejoin = True
            return
        deadline = time.monotonic() + self.config.get_int(WORKER_SYNC_TIMEOUT_MS) / 1000
        while self.state.snapshot().offset < assignment.config_offset:
            if time.monotonic() > deadline:
                self._need_rejoin = True  # could not catch up: leave the work, rejoin
                return
            self.config_reader.poll(0.2)
        self.read_config_to_end()
        self._stop_revoked(assignment.revoked)
        self.owned = (self.owned - assignment.revoked) | assignment.assigned
        self._last_generation = result.generation
        self._configured_at_assignment = configured_work(
            self.state.snapshot().task_counts_by_connector()
        )
        if assignment.revoked:
            self._need_rejoin = True  # the follow-up round hands out what was revoked
        if assignment.delay_ms > 0:
            self._rejoin_at = time.monotonic() + assignment.delay_ms / 1000
        self._events.clear()
        self.rebalancing = False
        log.info(
            "joined generation %d as %s (leader %s): owns %d connectors, %d tasks",
            result.generation,
            "leader" if self.is_leader else "follower",
            self.leader_url,
            len(self.owned.connectors),
            len(self.owned.tasks),
        )
        if self.is_leader:
            self._next_claim_at = 0.0
            self._claim_config_topic()
        else:
            self.configs.relinquish()
        self._apply_plan()
        self.joined.set()

    def _stop_revoked(self, revoked: Work) -> None:
        revoked_tasks = sorted(t for t in revoked.tasks if t in self._tasks)
        self.worker.stop_tasks(revoked_tasks)
        for task in revoked_tasks:
            self._forget_task(task)
        for name in sorted(revoked.connectors):
            if name in self._connector_targets:
                self._stop_connector(name)

    # -- carrying out the plan -------------------------------------------------------------

    def _apply_plan(self) -> None:
        snapshot = self.state.snapshot()
        steps = plan(
            self.owned, snapshot, LocalState(dict(self._connector_targets), dict(self._tasks))
        )
        if steps.is_empty():
            return
        self.worker.stop_tasks(steps.stop_tasks)
        for task in steps.stop_tasks:
            self._forget_task(task)
        for name in steps.stop_connectors:
            self._stop_connector(name)
        for name, target in steps.start_connectors:
            self._start_connector(name, snapshot.connector_configs[name], target)
        for name, target in steps.transition_connectors:
            self._transition_connector(name, snapshot.connector_configs[name], target)
        if steps.start_tasks:
            self.offsets_reader.read_to_end(READ_TIMEOUT_S)
        for task, target in steps.start_tasks:
            self._start_task(
                task,
                snapshot.connector_configs[task.connector],
                snapshot.task_configs[task],
                target,
            )
        for task, target in steps.transition_tasks:
            if task in self.worker.tasks:  # not while it awaits its fencing
                self.worker.transition_task(task, target)
            self._tasks[task] = dataclasses.replace(self._tasks[task], state=target)

    def _start_connector(self, name: str, config: Mapping[str, str], target: TargetState) -> None:
        self._connector_targets[name] = target
        self._connector_configs[name] = dict(config)
        try:
            started = self.worker.start_connector(name, config, target)
        except Exception as exc:
            log.warning("connector %s failed to start: %s", name, exc)
            self._connector_failed(name, exc)
            return
        if started and target is TargetState.STARTED:
            self._reconfigure.add(name)

    def _stop_connector(self, name: str) -> None:
        self.worker.stop_connector(name)
        self._connector_targets.pop(name, None)
        self._connector_configs.pop(name, None)
        self._reconfigure.discard(name)

    def _transition_connector(
        self, name: str, config: Mapping[str, str], target: TargetState
    ) -> None:
        previous = self._connector_targets.get(name)
        if target is TargetState.STOPPED or previous is TargetState.STOPPED:
            self._stop_connector(name)
            self._start_connector(name, config, target)
            return
        self._connector_targets[name] = target
        self.worker.transition_connector(name, target)
        if target is TargetState.STARTED:
            self._reconfigure.add(name)

    def _start_task(
        self,
        task: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        target: TargetState,
    ) -> None:
        if self.exactly_once.enabled and self._is_source(connector_config):
            # Startup steps 1-3: reserved here, started once the connector is fenced.
            generation = self.state.snapshot().task_config_generations.get(task.connector, -1)
            self._tasks[task] = RunningTask(target, dict(task_config), generation)
            self._awaiting_fencing[task] = generation
            if task.connector not in self._fencing_requests:
                self._fencing_requests[task.connector] = self._request_fencing(task.connector)
            return
        self._tasks[task] = RunningTask(target, dict(task_config))
        self.worker.start_task(task, connector_config, dict(task_config), target)

    def _forget_task(self, task: ConnectorTaskId) -> None:
        self._tasks.pop(task, None)
        self._awaiting_fencing.pop(task, None)

    def _is_source(self, connector_config: Mapping[str, str]) -> bool:
        try:
            cls = self.plugins.connector_class(connector_config.get("connector.class", ""))
        except ConfigException:
            return False
        return issubclass(cls, SourceConnector)

    def _handle_events(self) -> None:
        events, self._events = self._events, []
        snapshot = self.state.snapshot()
        restarts: list[RestartRequestRecord] = []
        for event in events:
            if isinstance(event, TasksChanged):
                self.fencing.cancel(event.connector)
            if isinstance(event, ConnectorChanged):
                name = event.connector
                new_config = snapshot.connector_configs.get(name)
                running = self._connector_configs.get(name)
                if running is not None and new_config is not None and new_config != running:
                    target = self._connector_targets[name]
                    self._stop_connector(name)
                    self._start_connector(name, new_config, target)
            elif isinstance(event, RestartRequested):
                restarts.append(event.request)
        self._apply_plan()
        for request in restarts:
            self._restart(request)
        configured = configured_work(snapshot.task_counts_by_connector())
        if configured != self._configured_at_assignment:
            log.info("the configured connectors or tasks changed; rejoining")
            self._need_rejoin = True

    def _restart(self, request: RestartRequestRecord) -> None:
        snapshot = self.state.snapshot()
        name = request.connector
        if not snapshot.contains(name):
            return
        steps = restart_plan(
            self.state.statuses(), name, request.include_tasks, request.only_failed
        )
        if steps.restart_connector and name in self._connector_targets:
            target = self._connector_targets[name]
            self._write_status(
                ConnectorStatus(
                    name, status_records.State.RESTARTING, self.worker_id, self.member.generation
                )
            )
            self._stop_connector(name)
            self._start_connector(name, snapshot.connector_configs[name], target)
        for number in steps.tasks:
            task = ConnectorTaskId(name, number)
            if task in self._tasks and task in snapshot.task_configs:
                target = snapshot.target_state(name) or TargetState.STARTED
                self._write_status(
                    TaskStatus(
                        name,
                        number,
                        status_records.State.RESTARTING,
                        self.worker_id,
                        self.member.generation,
                    )
                )
                self.worker.stop_task(task)
                self._start_task(
                    task, snapshot.connector_configs[name], snapshot.task_configs[task], target
                )

    def restart_task(self, task: ConnectorTaskId) -> None:
        """Restart a task this worker runs (``POST /connectors/{c}/tasks/{t}/restart``).

        An exactly-once source task restarts only on an up-to-date view (KIP-618): the
        config topic is read to its end first (500 if that fails), a task that no longer
        exists is 404, and new configs that call for a rebalance are 409."""
        snapshot = self.state.snapshot()
        if self.exactly_once.enabled and self._is_source(
            snapshot.connector_configs.get(task.connector, {})
        ):
            snapshot = self._fresh_snapshot_for_restart(task)
        if task not in self._tasks or task not in snapshot.task_configs:
            raise NotLeaderError(None)
        target = snapshot.target_state(task.connector) or TargetState.STARTED
        self.worker.stop_task(task)
        self._start_task(
            task, snapshot.connector_configs[task.connector], snapshot.task_configs[task], target
        )

    def _fresh_snapshot_for_restart(self, task: ConnectorTaskId) -> Any:
        try:
            self.read_config_to_end()
        except ConnectException as exc:
            raise ConnectRestException(
                500,
                f"Failed to read to the end of the config topic before restarting {task}: {exc}",
            ) from exc
        snapshot = self.state.snapshot()
        refused = zombie_fencing.restart_refusal(
            snapshot, task, self._configured_at_assignment, self._need_rejoin
        )
        if refused is not None:
            raise refused
        return snapshot

    def runs_task(self, task: ConnectorTaskId) -> bool:
        return task in self._tasks

    # -- task configs ----------------------------------------------------------------------

    def _reconfigure_connectors(self) -> None:
        for name in list(self._connector_targets):
            instance = self.worker.connectors.get(name)
            if instance is not None and instance.take_reconfiguration_request():
                self._reconfigure.add(name)
        if self.rebalancing or self.leader_id is None:
            return
        for name in sorted(self._reconfigure):
            if self._connector_targets.get(name) is not TargetState.STARTED:
                self._reconfigure.discard(name)
                continue
            instance = self.worker.connectors.get(name)
            if instance is None or not instance.running:
                self._reconfigure.discard(name)
                continue
            snapshot = self.state.snapshot()
            config = snapshot.connector_configs.get(name)
            if config is None:
                self._reconfigure.discard(name)
                continue
            try:
                configs = self.worker.connector_task_configs(
                    name, int(config.get("tasks.max", "1"))
                )
            except Exception as exc:
                log.warning("connector %s failed to generate task configs: %s", name, exc)
                self._connector_failed(name, exc)
                self._reconfigure.discard(name)
                continue
            stored = leader_duties.stored_task_configs(snapshot, name)
            if name not in snapshot.inconsistent and not task_configs_changed(stored, configs):
                self._reconfigure.discard(name)
                continue
            try:
                if self.is_leader:
                    self.configs.write_task_configs(name, configs)
                else:
                    self._send_task_configs(name, configs)
                self._reconfigure.discard(name)
            except Exception as exc:
                log.warning("task configs of %s not written yet: %s", name, exc)

    def _send_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        key = self.state.snapshot().session_key
        if self.leader_url is None or key is None:
            raise ConnectException("no leader or session key yet")
        internal_requests.put_signed(
            f"{self.leader_url.rstrip('/')}/connectors/{name}/tasks?forward=false",
            json.dumps(configs).encode(),
            key.key,
            str(self.config.get(SIGNATURE_ALGORITHM)),
            timeout_s=30,
        )

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Refuse an internal request (``/tasks``, ``/fence``) that is not signed with the
        current session key, with Kafka's status codes (``request_signing.refusal``).
        Only the ``sessioned`` protocol distributes keys; without it Kafka checks nothing."""
        if self.protocol is not ConnectProtocolVersion.SESSIONED:
            return
        key = self.state.snapshot().session_key
        refused = request_signing.refusal(
            None if key is None else key.key,
            body,
            headers,
            self.config.get_list(VERIFICATION_ALGORITHMS),
        )
        if refused is not None:
            raise ConnectRestException(*refused)

    # -- zombie fencing (KIP-618) ----------------------------------------------------------

    def fence_zombies(self, name: str) -> concurrent.futures.Future[None]:
        """Leader, on the herder thread (``PUT /connectors/{c}/fence``): make sure the
        connector's previous task generation is fenced out and a task-count record follows
        its latest task configs (``leader_fencing``). Returns the round's future."""
        self._require_leader()
        snapshot = self.state.snapshot()
        if not snapshot.contains(name):
            raise ConnectRestException(404, f"Connector {name} not found")
        config = snapshot.connector_configs[name]
        if not self._is_source(config):
            raise ConnectRestException(400, f"Connector {name} is not a source connector")
        return self.fencing.fence_zombies(name, config)

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderError(self.leader_url)

    def _fence_producers(
        self, connector: str, connector_config: Mapping[str, str], ids: Sequence[str]
    ) -> None:
        admin = client_configs.connector_admin_config(self.config, connector, connector_config)
        ProducerFencer(admin).fence(ids)

    def _request_fencing(self, name: str) -> concurrent.futures.Future[None]:
        """Startup step 2: ask the leader for a round of fencing of ``name``."""
        if self.is_leader:
            try:
                return self.fence_zombies(name)
            except Exception as exc:
                failed: concurrent.futures.Future[None] = concurrent.futures.Future()
                failed.set_exception(exc)
                return failed
        key = self.state.snapshot().session_key
        return internal_requests.request_fencing(
            self.leader_url,
            name,
            b"" if key is None else key.key,
            str(self.config.get(SIGNATURE_ALGORITHM)),
        )

    def _start_fenced_tasks(self) -> None:
        """Startup step 3 for the tasks whose fencing request completed: read the config
        topic to its end and start the tasks still of the latest, fenced generation; a
        failed request fails its tasks; a task of an older generation is dropped (the plan
        starts it again for the new one)."""
        finished = [n for n, f in self._fencing_requests.items() if f.done()]
        abandoned = False
        for name in finished:
            error = self._fencing_requests.pop(name).exception()
            if error is None:
                try:
                    self.read_config_to_end()
                except ConnectException as exc:
                    error = exc
            snapshot = self.state.snapshot()
            for task in sorted(t for t in self._awaiting_fencing if t.connector == name):
                generation = self._awaiting_fencing.pop(task)
                running = self._tasks[task]
                if error is not None:
                    log.warning("zombie fencing for %s failed: %s", task, error)
                    self._task_failed(task, error)
                elif (
                    zombie_fencing.may_start_task(snapshot, name, generation)
                    and task in self.owned.tasks
                ):
                    self._started_generations[task] = generation
                    self.worker.start_task(
                        task, snapshot.connector_configs[name], dict(running.config), running.state
                    )
                else:
                    log.info("not starting %s: its connector has new task configs", task)
                    del self._tasks[task]
                    abandoned = True
        if abandoned:
            self._apply_plan()

    def before_first_poll(self, task: ConnectorTaskId) -> None:
        """The worker's hook for an exactly-once source task, run on the task's thread
        once its transactional producer is initialized and before its first poll
        (startup steps 6-7): raises ConnectException if the task may no longer run (its
        connector has newer task configs, or it was revoked from this worker)."""
        generation = self._started_generations.get(task)
        if generation is None:
            raise ConnectException(f"Cannot start source task {task}: it was not fenced here")
        self.verify_task_generation(task, generation)

    def verify_task_generation(self, task: ConnectorTaskId, generation: int) -> None:
        """Read the config topic to its end (on the herder thread) and check that
        ``task`` is still of ``generation`` and assigned to this worker."""
        if threading.current_thread() is self._thread:
            self._verify_task_generation(task, generation)
            return
        check = self.submit(
            lambda: self._verify_task_generation(task, generation), leader_only=False
        )
        check.result(READ_TIMEOUT_S * 2)

    def _verify_task_generation(self, task: ConnectorTaskId, generation: int) -> None:
        self.read_config_to_end()
        current = self.state.snapshot().task_config_generations.get(task.connector, -1)
        if current != generation:
            raise ConnectException(
                f"Cannot start source task {task} with exactly-once support as the connector "
                "has already generated a new set of task configs"
            )
        if task not in self.owned.tasks:
            raise ConnectException(
                f"Cannot start source task {task} as it has already been revoked from this worker"
            )

    def _task_failed(self, task: ConnectorTaskId, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self._write_status(
            TaskStatus(
                task.connector,
                task.task,
                status_records.State.FAILED,
                self.worker_id,
                self.member.generation,
                trace,
            )
        )

    # -- the leader ------------------------------------------------------------------------

    def _claim_config_topic(self) -> None:
        """Leader: take write ownership of the config topic when it writes transactionally
        (after an election, or after being fenced out while still the leader)."""
        if not self.configs.transactional or self.configs.claimed:
            return
        if time.monotonic() < self._next_claim_at:
            return
        try:
            self.configs.claim()
        except ConnectException as exc:
            log.warning("unable to claim write privileges for the config topic: %s", exc)
            self._next_claim_at = time.monotonic() + 1.0

    def _fenced_from_config_topic(self) -> None:
        """A leader write failed (fenced by a newer leader, typically): rejoin to learn
        who leads; the next claim happens if this worker still does."""
        self._need_rejoin = True

    def _leader_duties(self) -> None:
        snapshot = self.state.snapshot()
        records: list[ConfigRecord] = leader_duties.task_config_updates(snapshot, {})
        if self.protocol is ConnectProtocolVersion.SESSIONED and leader_duties.session_key_due(
            snapshot, int(self.clock() * 1000), self.config.get_int(KEY_TTL_MS)
        ):
            size = self.config.get(KEY_SIZE)
            records.append(
                leader_duties.new_session_key(
                    int(self.clock() * 1000),
                    os.urandom,
                    str(self.config.get(KEY_ALGORITHM)),
                    int(size) if size is not None else None,
                )
            )
        if records:
            self.configs.write(records)

    def delete_connector(self, name: str) -> None:
        """Leader only: config tombstones, then status tombstones."""
        self.configs.remove_connector(name)
        tombstones = self.state.statuses().remove_connector(name)
        self.status_writer.write([status_records.encode(t) for t in tombstones], READ_TIMEOUT_S)

    def write_source_offsets(
        self, name: str, offsets: Mapping[Any, Mapping[str, Any] | None]
    ) -> None:
        records = [
            offset_records.encode(
                offset_records.OffsetRecord(
                    name, dict(partition), None if offset is None else dict(offset)
                )
            )
            for partition, offset in offsets.items()
        ]
        self.offsets_writer.write(records, READ_TIMEOUT_S)
        self.offsets_reader.read_to_end(READ_TIMEOUT_S)

    def read_offsets_to_end(self) -> None:
        self.offsets_reader.read_to_end(READ_TIMEOUT_S)

    # -- statuses --------------------------------------------------------------------------

    def _connector_failed(self, name: str, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self._write_status(
            ConnectorStatus(
                name, status_records.State.FAILED, self.worker_id, self.member.generation, trace
            )
        )

    def _write_status(self, status: StatusRecord) -> None:
        if (
            isinstance(status, (ConnectorStatus, TaskStatus))
            and status.state is status_records.State.UNASSIGNED
            and not self.state.statuses().can_write_safely(status)
        ):
            return  # putSafe: another worker already runs it
        key, value = status_records.encode(status)
        self.status_writer.send(key, value)
