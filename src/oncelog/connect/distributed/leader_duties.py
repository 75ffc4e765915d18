"""What only the group leader writes to the config topic (it is the only writer):

- new task configs when a connector generated configs that differ from the stored
  ones, or when the stored set is inconsistent (a previous leader died mid-write);
- an empty task set for a STOPPED connector, so no worker runs its tasks;
- a fresh session key when there is none or it is older than ``inter.worker.key.ttl.ms``.

Pure decisions; the herder writes the returned records, then reads the config topic
back to the end before acting on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from oncelog.connect.api.connector import Config
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.runtime.worker_connector import task_configs_changed
from oncelog.connect.storage.config_records import (
    ConfigRecord,
    SessionKeyRecord,
    task_config_records,
)
from oncelog.connect.storage.config_state import ClusterConfigSnapshot


def stored_task_configs(snapshot: ClusterConfigSnapshot, connector: str) -> list[Config]:
    return [dict(snapshot.task_configs[t]) for t in snapshot.tasks(connector)]


def task_config_updates(
    snapshot: ClusterConfigSnapshot, generated: Mapping[str, list[Config]]
) -> list[ConfigRecord]:
    """Records to write for connectors whose tasks must change (``generated``: the task
    configs each running connector produced)."""
    records: list[ConfigRecord] = []
    for connector in snapshot.connectors():
        stored = stored_task_configs(snapshot, connector)
        if snapshot.target_state(connector) is TargetState.STOPPED:
            if stored or connector in snapshot.inconsistent:
                records.extend(task_config_records(connector, []))
            continue
        if connector not in generated:
            continue
        new = generated[connector]
        if connector in snapshot.inconsistent or task_configs_changed(stored, new):
            records.extend(task_config_records(connector, new))
    return records


def session_key_due(snapshot: ClusterConfigSnapshot, now_ms: int, ttl_ms: int) -> bool:
    key = snapshot.session_key
    return key is None or key.creation_timestamp + ttl_ms <= now_ms


def new_session_key(
    now_ms: int,
    random_bytes: Callable[[int], bytes],
    algorithm: str = "HmacSHA256",
    size_bits: int | None = None,
) -> SessionKeyRecord:
    """A key of ``size_bits`` (default: the algorithm's block-sized 256 bits)."""
    return SessionKeyRecord(random_bytes((size_bits or 256) // 8), algorithm, now_ms)
