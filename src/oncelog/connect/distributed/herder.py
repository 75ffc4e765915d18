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
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TypeVar

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
from oncelog.connect.distributed import internal_requests, request_signing
from oncelog.connect.distributed.assignor import AssignorState
from oncelog.connect.distributed.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    ConnectProtocolVersion,
    WorkerState,
    decode_assignment,
    join_protocols,
)
from oncelog.connect.distributed.errors import NotLeaderError
from oncelog.connect.distributed.fenced_task_starts import FencedTaskStarts, FencingHooks
from oncelog.connect.distributed.group_assignment import leader_assignments
from oncelog.connect.distributed.leader import Leader
from oncelog.connect.distributed.leader_fencing import Fencer, LeaderFencing
from oncelog.connect.distributed.membership import (
    COORDINATOR_ERRORS,
    REJOIN_ERRORS,
    ConnectGroupMember,
    MembershipError,
)
from oncelog.connect.distributed.requests import GroupView, Kind, RequestQueue
from oncelog.connect.distributed.restarts import Restarts
from oncelog.connect.distributed.task_config_sender import TaskConfigSender
from oncelog.connect.runtime.loggers import Loggers, parse_level
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.work import EMPTY, Work, configured_work
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import (
    HEARTBEAT_INTERVAL_MS,
    SCHEDULED_REBALANCE_MAX_DELAY_MS,
    WORKER_SYNC_TIMEOUT_MS,
    WORKER_UNSYNC_BACKOFF_MS,
    WorkerConfig,
)
from oncelog.connect.runtime.worker_connector import task_configs_changed
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

SIGNATURE_ALGORITHM = "inter.worker.signature.algorithm"
VERIFICATION_ALGORITHMS = "inter.worker.verification.algorithms"
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
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
        # Connectors whose task configs are to be generated and stored.
        self._reconfigure: set[str] = set()
        self.task_configs = TaskConfigSender(self._send_task_configs)
        self.leader = Leader(config, protocol, configs.writer, statuses, configs.snapshot, clock)
        self.fencing = LeaderFencing(
            group_id,
            configs.snapshot,
            configs.read_to_end,
            configs.writer.write_task_count,
            lambda fn: self.submit(fn, Kind.LOCAL),
            fence_producers,
            self._require_leader,
        )
        self.fenced_starts = FencedTaskStarts(
            FencingHooks(
                snapshot=configs.snapshot,
                read_config_to_end=configs.read_to_end,
                owned_tasks=lambda: self.owned.tasks,
                request_fencing=self._request_fencing,
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
        self.task_configs.close()
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

    def _group_view(self) -> GroupView:
        return GroupView(
            rebalancing=self.rebalancing,
            rebalance_due=self._need_rejoin,
            leader_url=self.leader_url,
            is_leader=self.is_leader,
        )

    # -- the loop --------------------------------------------------------------------------

    def tick(self) -> None:
        now = time.monotonic()
        if self._rejoin_at is not None and now >= self._rejoin_at:
            self._rejoin_at = None
            self._need_rejoin = True
        if self.configs.take_write_failure():
            self._need_rejoin = True  # fenced by a newer leader: learn who leads
        if self._need_rejoin:
            self._rebalance()
        self.statuses.poll(0)
        self.offsets.poll(0)
        self.configs.poll(0.05)
        self._handle_events()
        if self.fenced_starts.start_fenced():
            self._apply_plan()
        if self.is_leader and not self._need_rejoin:
            self.leader.tick()
        self._reconfigure_connectors()
        self.requests.serve(self._group_view())
        self._handle_events()

    def read_config_to_end(self) -> None:
        self.configs.read_to_end()

    # -- rebalancing -----------------------------------------------------------------------

    def _rebalance(self) -> None:
        self.rebalancing = True
        log.info("joining the group (generation %d)", self.member.generation)
        snapshot = self.configs.snapshot()
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
            self.configs.read_to_end()
            snapshot = self.configs.snapshot()
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
            self.configs.read_to_end()
            self._need_rejoin = True
            return
        deadline = time.monotonic() + self.config.get_int(WORKER_SYNC_TIMEOUT_MS) / 1000
        while self.configs.snapshot().offset < assignment.config_offset:
            if time.monotonic() > deadline:
                self._need_rejoin = True  # could not catch up: leave the work, rejoin
                return
            self.configs.poll(0.2)
        self.configs.read_to_end()
        self._stop_revoked(assignment.revoked)
        self.owned = (self.owned - assignment.revoked) | assignment.assigned
        self._last_generation = result.generation
        self._configured_at_assignment = configured_work(
            self.configs.snapshot().task_counts_by_connector()
        )
        if assignment.revoked:
            self._need_rejoin = True  # the follow-up round hands out what was revoked
        if assignment.delay_ms > 0:
            self._rejoin_at = time.monotonic() + assignment.delay_ms / 1000
        self.configs.drop_events()
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
        steps = plan(self.owned, snapshot, self._local_state())
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
            self._connector_failed(name, exc)
            return
        if started and target is TargetState.STARTED:
            self._reconfigure.add(name)

    def _stop_connector(self, name: str) -> None:
        self.worker.stop_connector(name)
        self._reconfigure.discard(name)
        self.task_configs.cancel(name)

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
            self._reconfigure.add(name)

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
        try:
            cls = self.plugins.connector_class(connector_config.get("connector.class", ""))
        except ConfigException:
            return False
        return issubclass(cls, SourceConnector)

    def _handle_events(self) -> None:
        events = self.configs.take_events()
        if not events:
            return
        snapshot = self.configs.snapshot()
        restarts = []
        for event in events:
            if isinstance(event, TasksChanged):
                self.fencing.cancel(event.connector)
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
        configured = configured_work(snapshot.task_counts_by_connector())
        if configured != self._configured_at_assignment:
            log.info("the configured connectors or tasks changed; rejoining")
            self._need_rejoin = True

    # -- task configs ----------------------------------------------------------------------

    def _reconfigure_connectors(self) -> None:
        for name in self.task_configs.completed():
            self._reconfigure.discard(name)
        for name, running in self.worker.connectors.items():
            if running.take_reconfiguration_request():
                self._reconfigure.add(name)
        if self.rebalancing or self.leader_id is None:
            return
        targets = self.worker.connector_targets()
        for name in sorted(self._reconfigure):
            instance = self.worker.connectors.get(name)
            snapshot = self.configs.snapshot()
            config = snapshot.connector_configs.get(name)
            if (
                targets.get(name) is not TargetState.STARTED
                or instance is None
                or not instance.running
                or config is None
            ):
                self._reconfigure.discard(name)
                continue
            if self.task_configs.busy(name):
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
            stored = [dict(snapshot.task_configs[t]) for t in snapshot.tasks(name)]
            if name not in snapshot.inconsistent and not task_configs_changed(stored, configs):
                self._reconfigure.discard(name)
                continue
            if not self.is_leader:
                self.task_configs.send(name, configs)  # off this thread; retried with backoff
                continue
            try:
                self.configs.writer.write_task_configs(name, configs)
                self._reconfigure.discard(name)
            except Exception as exc:
                log.warning("task configs of %s not written yet: %s", name, exc)

    def _send_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """On the sender's thread: the leader's internal ``PUT /connectors/{c}/tasks``."""
        key = self.configs.snapshot().session_key
        leader_url = self.leader_url
        if leader_url is None or key is None:
            raise ConnectException("no leader or session key yet")
        internal_requests.put_signed(
            f"{leader_url.rstrip('/')}/connectors/{name}/tasks?forward=false",
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
        key = self.configs.snapshot().session_key
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
        snapshot = self.configs.snapshot()
        if not snapshot.contains(name):
            raise ConnectRestException(404, f"Connector {name} not found")
        config = snapshot.connector_configs[name]
        if not self._is_source(config):
            raise ConnectRestException(400, f"Connector {name} is not a source connector")
        return self.fencing.fence_zombies(name, config)

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderError(self.leader_url)

    def _request_fencing(self, name: str) -> concurrent.futures.Future[None]:
        """Startup step 2: ask the leader for a round of fencing of ``name``."""
        if self.is_leader:
            try:
                return self.fence_zombies(name)
            except Exception as exc:
                failed: concurrent.futures.Future[None] = concurrent.futures.Future()
                failed.set_exception(exc)
                return failed
        key = self.configs.snapshot().session_key
        return internal_requests.request_fencing(
            self.leader_url,
            name,
            b"" if key is None else key.key,
            str(self.config.get(SIGNATURE_ALGORITHM)),
        )

    # -- statuses --------------------------------------------------------------------------

    def _task_failed(self, task: ConnectorTaskId, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.worker.report_failure(
            TaskStatus(
                task.connector, task.task, State.FAILED, self.worker_id,
                self.member.generation, trace,
            )
        )  # fmt: skip

    def _connector_failed(self, name: str, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.worker.report_failure(
            ConnectorStatus(name, State.FAILED, self.worker_id, self.member.generation, trace)
        )
