"""The leader's writes to the config topic (it is the topic's only writer).

Every write is read back to the end before the caller goes on, so the herder acts on
what the topic holds. With ``exactly.once.source.support`` ``preparing`` or ``enabled``
(KIP-618) the leader writes through a transactional producer (transactional id
``connect-cluster-<group>``), one transaction per write:

- after winning leadership the leader *claims* the topic (InitProducerId), which fences
  out the producer of any earlier leader and aborts what that one left open;
- a zombie leader (one that stalled, fell out of the group and came back believing it
  still leads) then fails on its next write with a fenced error instead of writing, say,
  a task-count record after task configs a newer leader wrote: its write raises
  :class:`PrivilegedWriteError`, the writer lets go of its producer, and the herder
  rejoins the group (and claims again if it still leads);
- with support ``enabled``, readers use read_committed, so an aborted write is never
  applied (with ``preparing`` they read uncommitted, as Kafka's
  ``KafkaConfigBackingStore``: the cluster is still mixed).

Without exactly-once support the leader writes with a plain idempotent producer, as
before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from oncelog.connect.api.errors import ConnectException, ConnectRestException
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.storage import config_records
from oncelog.connect.storage.config_records import (
    ConfigRecord,
    ConnectorConfigRecord,
    RestartRequestRecord,
    TargetStateRecord,
    TaskCountRecord,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot

log = logging.getLogger(__name__)

Encoded = Sequence[tuple[bytes | str, bytes | None]]


class LogWriter(Protocol):
    def write(self, records: Encoded, timeout_s: float) -> None: ...


class PrivilegedLogWriter(LogWriter, Protocol):
    def init(self, timeout_s: float) -> None:
        """Become the one writer: fences out earlier instances."""

    def close(self) -> None: ...


class PrivilegedWriteError(ConnectException):
    """A transactional write of the leader failed (typically: fenced out by a newer
    leader). The request may be retried once the worker has rejoined."""


class ConfigWriter:
    """Encodes, writes and reads back the leader's config records.

    ``privileged``: a factory of transactional writers when the leader must write
    transactionally, None otherwise. ``read_back`` reads the topic to its end and
    applies what it read; ``on_write_failure`` runs when a transactional write fails (the
    herder rejoins the group)."""

    def __init__(
        self,
        plain: LogWriter,
        privileged: Callable[[], PrivilegedLogWriter] | None,
        read_back: Callable[[], None],
        snapshot: Callable[[], ClusterConfigSnapshot],
        *,
        on_write_failure: Callable[[], None] = lambda: None,
        timeout_s: float = 30.0,
    ) -> None:
        self.on_write_failure = on_write_failure
        self.plain = plain
        self.privileged = privileged
        self.read_back = read_back
        self.snapshot = snapshot
        self.timeout_s = timeout_s
        self._writer: PrivilegedLogWriter | None = None

    @property
    def transactional(self) -> bool:
        return self.privileged is not None

    @property
    def claimed(self) -> bool:
        return self._writer is not None

    def claim(self) -> None:
        """Take write ownership of the topic (the leader, after a rebalance); a no-op
        without transactions or when already claimed. Raises ConnectException."""
        if self.privileged is None or self._writer is not None:
            return
        writer = self.privileged()
        try:
            writer.init(self.timeout_s)
        except Exception as exc:
            writer.close()
            raise ConnectException(
                f"Failed to create and initialize the fencable producer for the config topic: {exc}"
            ) from exc
        self._writer = writer
        log.info("claimed write privileges for the config topic")

    def relinquish(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:
                log.debug("closing the config topic's fencable producer failed", exc_info=True)

    # -- writing ---------------------------------------------------------------------------

    def write(self, records: list[ConfigRecord]) -> None:
        """Write ``records`` (in one transaction when transactional) and read them back."""
        encoded = [config_records.encode(r) for r in records]
        if self.privileged is None:
            self.plain.write(encoded, self.timeout_s)
        else:
            if self._writer is None:
                raise PrivilegedWriteError(
                    "Cannot write to the config topic without write privileges (not the leader, "
                    "or fenced out by a newer leader); the request can be retried"
                )
            try:
                self._writer.write(encoded, self.timeout_s)
            except Exception as exc:
                log.warning("fencable write to the config topic failed: %s", exc)
                self.relinquish()
                self.on_write_failure()
                raise PrivilegedWriteError(
                    "Failed to write to the config topic; this may be due to a transient error "
                    f"and the request can be safely retried: {exc}"
                ) from exc
        self.read_back()

    def write_unprivileged(self, records: list[ConfigRecord]) -> None:
        """Records any worker may write, with no claim and no read-back: target states
        on pause and resume, cluster-wide logger levels (Kafka's ``putTargetState`` and
        ``putLoggerLevel`` are not privileged writes)."""
        self.plain.write([config_records.encode(r) for r in records], self.timeout_s)

    def put_connector(
        self, name: str, config: Mapping[str, str], target: TargetState | None = None
    ) -> None:
        records: list[ConfigRecord] = []
        if target is not None:
            records.append(TargetStateRecord(name, target))
        records.append(ConnectorConfigRecord(name, dict(config)))
        self.write(records)

    def set_target_state(self, name: str, target: TargetState) -> None:
        self.write([TargetStateRecord(name, target)])

    def remove_connector(self, name: str) -> None:
        self.write(config_records.connector_removal_records(name))

    def request_restart(self, request: RestartRequestRecord) -> None:
        self.write([request])

    def write_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Store a connector's task configs (generated where the connector runs)."""
        if not self.snapshot().contains(name):
            raise ConnectRestException(404, f"Connector {name} not found")
        self.write(config_records.task_config_records(name, configs))

    def write_task_count(self, name: str, task_count: int) -> None:
        """The KIP-618 task-count record: this generation's producers are fenced."""
        self.write([TaskCountRecord(name, task_count)])
