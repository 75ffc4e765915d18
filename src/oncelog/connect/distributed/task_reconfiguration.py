"""Task configs generated where a connector runs and stored by the leader (Kafka's
``DistributedHerder.reconfigureConnector``).

A connector is asked for task configs when it starts, when its config changes and when
it calls ``request_task_reconfiguration()``. Configs that differ from the stored ones
(or repair an inconsistent set) are written by the leader itself, or sent by a follower
to the leader's internal ``PUT /connectors/{c}/tasks``, signed with the session key,
from ``task_config_sender``'s thread.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.distributed import internal_requests
from oncelog.connect.distributed.connect_protocol import ConnectProtocolVersion
from oncelog.connect.distributed.task_config_sender import TaskConfigSender
from oncelog.connect.runtime.worker_connector import task_configs_changed

if TYPE_CHECKING:
    from oncelog.connect.distributed.herder import Herder

log = logging.getLogger(__name__)


class TaskReconfiguration:
    def __init__(self, herder: Herder) -> None:
        self.herder = herder
        self.pending: set[str] = set()
        self.sender = TaskConfigSender(self._send)

    def request(self, name: str) -> None:
        self.pending.add(name)

    def forget(self, name: str) -> None:
        self.pending.discard(name)
        self.sender.cancel(name)

    def close(self) -> None:
        self.sender.close()

    def run(self) -> None:
        """On the herder thread, each tick."""
        herder, worker = self.herder, self.herder.worker
        for name in self.sender.completed():
            self.pending.discard(name)
        for name, running in worker.connectors.items():
            if running.take_reconfiguration_request():
                self.pending.add(name)
        if herder.group.rebalancing or herder.group.leader_id is None:
            return
        targets = worker.connector_targets()
        for name in sorted(self.pending):
            instance = worker.connectors.get(name)
            snapshot = herder.configs.snapshot()
            config = snapshot.connector_configs.get(name)
            if (
                targets.get(name) is not TargetState.STARTED
                or instance is None
                or not instance.running
                or config is None
            ):
                self.pending.discard(name)
                continue
            if self.sender.busy(name):
                continue
            try:
                configs = worker.connector_task_configs(name, int(config.get("tasks.max", "1")))
            except Exception as exc:
                log.warning("connector %s failed to generate task configs: %s", name, exc)
                herder.connector_failed(name, exc)
                self.pending.discard(name)
                continue
            stored = [dict(snapshot.task_configs[t]) for t in snapshot.tasks(name)]
            if name not in snapshot.inconsistent and not task_configs_changed(stored, configs):
                self.pending.discard(name)
                continue
            if not herder.group.is_leader:
                self.sender.send(name, configs)  # off this thread; retried with backoff
                continue
            try:
                herder.configs.writer.write_task_configs(name, configs)
                self.pending.discard(name)
            except Exception as exc:
                log.warning("task configs of %s not written yet: %s", name, exc)

    def _send(self, name: str, configs: list[dict[str, str]]) -> None:
        """On the sender's thread: the leader's internal ``PUT /connectors/{c}/tasks``."""
        herder = self.herder
        key = herder.configs.snapshot().session_key
        leader_url = herder.group.leader_url
        if leader_url is None:
            raise ConnectException("no leader yet")
        sessioned = herder.group.current_protocol is ConnectProtocolVersion.SESSIONED
        if sessioned and key is None:
            raise ConnectException("no session key yet")
        internal_requests.put_signed(
            f"{leader_url.rstrip('/')}/connectors/{name}/tasks?forward=false",
            json.dumps(configs).encode(),
            None if key is None or not sessioned else key.key,
            herder.config.settings.signature_algorithm,
            ssl_context=herder.rest_ssl,
            timeout_s=30,
        )
