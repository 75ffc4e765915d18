"""What the group leader does besides serving requests (it is the config topic's only
writer, and it cleans the status topic):

- claims write privileges on the config topic after an election when it writes
  transactionally (KIP-618), and again after being fenced out while still leading;
- writes an empty task set for a STOPPED connector and a fresh session key when due
  (``leader_duties`` decides);
- tombstones the statuses of connectors and tasks that no longer exist: after every
  rebalance, as Kafka's ``DistributedHerder.updateDeletedConnectorStatus`` and
  ``updateDeletedTaskStatus`` do, and also whenever the status or config topic moved
  on, so a status a stopping worker writes late does not linger either. A STOPPED
  connector shows no tasks, and after ``tasks.max`` 3 -> 1 only task 0 remains.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.distributed import leader_duties
from oncelog.connect.distributed.connect_protocol import ConnectProtocolVersion
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.config_records import ConfigRecord
from oncelog.connect.storage.config_state import ClusterConfigSnapshot
from oncelog.connect.storage.config_writer import ConfigWriter
from oncelog.connect.storage.status_records import StatusTombstone
from oncelog.connect.storage.status_store import StatusStore

log = logging.getLogger(__name__)

CLAIM_RETRY_S = 1.0
WRITE_TIMEOUT_S = 30.0


class Leader:
    def __init__(
        self,
        config: WorkerConfig,
        protocol: ConnectProtocolVersion,
        configs: ConfigWriter,
        statuses: StatusStore,
        snapshot: Callable[[], ClusterConfigSnapshot],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.protocol = protocol
        self.configs = configs
        self.statuses = statuses
        self.snapshot = snapshot
        self.clock = clock
        self._next_claim_at = 0.0
        self._cleaned_at: tuple[int, int] | None = None  # (status version, config offset)
        self._tombstoned: set[StatusTombstone] = set()

    def elected(self) -> None:
        """After a rebalance that made this worker the leader."""
        self._next_claim_at = 0.0
        self.claim()
        self.clean_statuses(force=True)

    def demoted(self) -> None:
        self.configs.relinquish()

    def claim(self) -> None:
        """Take write ownership of the config topic when it writes transactionally."""
        if not self.configs.transactional or self.configs.claimed:
            return
        if time.monotonic() < self._next_claim_at:
            return
        try:
            self.configs.claim()
        except ConnectException as exc:
            log.warning("unable to claim write privileges for the config topic: %s", exc)
            self._next_claim_at = time.monotonic() + CLAIM_RETRY_S

    def tick(self) -> None:
        self.claim()
        if self.configs.claimed or not self.configs.transactional:
            self._write_duties()
        self.clean_statuses()

    def _write_duties(self) -> None:
        snapshot = self.snapshot()
        records: list[ConfigRecord] = leader_duties.task_config_updates(snapshot, {})
        now_ms = int(self.clock() * 1000)
        if self.protocol is ConnectProtocolVersion.SESSIONED and leader_duties.session_key_due(
            snapshot, now_ms, self.config.settings.key_ttl_ms
        ):
            size = self.config.settings.key_size
            records.append(
                leader_duties.new_session_key(
                    now_ms,
                    os.urandom,
                    self.config.settings.key_generation_algorithm,
                    int(size) if size is not None else None,
                )
            )
        if records:
            self.configs.write(records)

    def clean_statuses(self, *, force: bool = False) -> None:
        """Tombstone the statuses of deleted connectors and tasks (each once until the
        tombstone is read back)."""
        snapshot = self.snapshot()
        mark = (self.statuses.version, snapshot.offset)
        if not force and mark == self._cleaned_at:
            return
        self._cleaned_at = mark
        deleted = self.statuses.deleted(
            snapshot.connectors, lambda c: [t.task for t in snapshot.tasks(c)]
        )
        self._tombstoned &= set(deleted)
        new = [t for t in deleted if t not in self._tombstoned]
        if not new:
            return
        log.debug("cleaning the statuses of deleted connectors and tasks: %s", new)
        try:
            self.statuses.write(new, WRITE_TIMEOUT_S)
        except Exception as exc:
            log.warning("could not clean the statuses of deleted connectors and tasks: %s", exc)
            self._cleaned_at = None
            return
        self._tombstoned |= set(new)
