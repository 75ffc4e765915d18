"""A worker's side of KIP-618 task startup, for exactly-once source tasks.

With ``exactly.once.source.support=enabled`` a source task starts only once its
connector has been fenced for the task's generation (the steps of Kafka's
``DistributedHerder.startTask`` for exactly-once source tasks):

1. the task is *reserved* here, with the generation of its connector's task configs;
2. the worker asks the leader for a round of fencing (``fence_zombies`` on the leader
   itself, else the leader's signed ``PUT /connectors/{c}/fence``), once per connector;
3. when the request completes, the config topic is read to its end and the task starts
   if its generation is still the latest and it is still assigned here; a failed
   request fails the task with the error as its trace; a task of an older generation is
   dropped (the next plan starts it for the new one);
4. once the task's transactional producer is initialized, and before its first poll,
   :meth:`FencedTaskStarts.before_first_poll` checks again on an up-to-date view (steps
   6-7): a newer generation or a revocation stops the task before it writes anything.

Everything runs on the herder thread except ``before_first_poll`` (the task's thread),
which hands its check to the herder thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed import zombie_fencing
from oncelog.connect.runtime.worker import RunningTask
from oncelog.connect.storage.config_state import ClusterConfigSnapshot

log = logging.getLogger(__name__)
READ_TIMEOUT_S = 30.0


@dataclass
class FencingHooks:
    """What the starts need from the herder and the worker."""

    snapshot: Callable[[], ClusterConfigSnapshot]
    read_config_to_end: Callable[[], None]
    owned_tasks: Callable[[], frozenset[ConnectorTaskId]]
    request_fencing: Callable[[str], concurrent.futures.Future[None]]
    start_task: Callable[
        [ConnectorTaskId, Mapping[str, str], dict[str, str], TargetState, int], None
    ]
    task_failed: Callable[[ConnectorTaskId, BaseException], None]
    generation_of: Callable[[ConnectorTaskId], int | None]  # of a task running here
    on_herder_thread: Callable[[Callable[[], None]], None]  # runs it there and waits


class FencedTaskStarts:
    def __init__(self, hooks: FencingHooks) -> None:
        self.hooks = hooks
        self._reserved: dict[ConnectorTaskId, RunningTask] = {}
        # Tasks whose fencing failed: FAILED, and held here as a failed task is held by
        # the worker, until a restart or new task configs replace them.
        self._failed: dict[ConnectorTaskId, RunningTask] = {}
        # One request per connector, for the generation it was made for.
        self._requests: dict[str, tuple[int, concurrent.futures.Future[None]]] = {}

    @property
    def reserved(self) -> dict[ConnectorTaskId, RunningTask]:
        """The tasks this worker holds without running them (awaiting fencing, or failed)."""
        return {**self._failed, **self._reserved}

    def reserve(
        self, task: ConnectorTaskId, config: Mapping[str, str], target: TargetState
    ) -> None:
        """Steps 1-2. A request made for an older generation does not fence this one:
        a new request replaces it."""
        generation = self.hooks.snapshot().task_config_generations.get(task.connector, -1)
        self._failed.pop(task, None)
        self._reserved[task] = RunningTask(target, dict(config), generation)
        current = self._requests.get(task.connector)
        if current is None or current[0] != generation:
            self._requests[task.connector] = (
                generation,
                self.hooks.request_fencing(task.connector),
            )

    def transition(self, task: ConnectorTaskId, target: TargetState) -> None:
        for held in (self._reserved, self._failed):
            if task in held:
                running = held[task]
                held[task] = RunningTask(target, running.config, running.generation)

    def forget(self, task: ConnectorTaskId) -> None:
        self._reserved.pop(task, None)
        self._failed.pop(task, None)

    def start_fenced(self) -> bool:
        """Step 3 for the connectors whose fencing request completed; True when a task
        was dropped for a newer generation (the caller plans again)."""
        abandoned = False
        for name in [n for n, (_, f) in self._requests.items() if f.done()]:
            error = self._requests.pop(name)[1].exception()
            if error is None:
                try:
                    self.hooks.read_config_to_end()
                except ConnectException as exc:
                    error = exc
            snapshot = self.hooks.snapshot()
            for task in sorted(t for t in self._reserved if t.connector == name):
                running = self._reserved.pop(task)
                generation = running.generation if running.generation is not None else -1
                if error is not None:
                    log.warning("zombie fencing for %s failed: %s", task, error)
                    self._failed[task] = running
                    self.hooks.task_failed(task, error)
                elif (
                    zombie_fencing.may_start_task(snapshot, name, generation)
                    and task in self.hooks.owned_tasks()
                ):
                    self.hooks.start_task(
                        task,
                        snapshot.connector_configs[name],
                        dict(running.config),
                        running.state,
                        generation,
                    )
                else:
                    log.info("not starting %s: its connector has new task configs", task)
                    abandoned = True
        return abandoned

    def before_first_poll(self, task: ConnectorTaskId) -> None:
        """On the task's thread (steps 6-7): raises ConnectException if the task may no
        longer run (its connector has newer task configs, or it was revoked here)."""
        generation = self.hooks.generation_of(task)
        if generation is None:
            raise ConnectException(f"Cannot start source task {task}: it was not fenced here")
        self.hooks.on_herder_thread(lambda: self.verify_generation(task, generation))

    def verify_generation(self, task: ConnectorTaskId, generation: int) -> None:
        """On the herder thread: read the config topic to its end and check that
        ``task`` is still of ``generation`` and assigned to this worker."""
        self.hooks.read_config_to_end()
        current = self.hooks.snapshot().task_config_generations.get(task.connector, -1)
        if current != generation:
            raise ConnectException(
                f"Cannot start source task {task} with exactly-once support as the connector "
                "has already generated a new set of task configs"
            )
        if task not in self.hooks.owned_tasks():
            raise ConnectException(
                f"Cannot start source task {task} as it has already been revoked from this worker"
            )
