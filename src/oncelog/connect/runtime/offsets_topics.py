"""Which offsets topic a source connector uses (KIP-618 per-connector offsets topics).

- ``offsets.storage.topic`` in the connector config: that topic, on the cluster the
  connector's producer writes to, whatever the worker's exactly-once setting;
- else, with exactly-once enabled, a connector whose producer targets another cluster
  (the connector's ``producer.override.bootstrap.servers``, or else the worker's
  ``producer.bootstrap.servers``, differs from the worker's) uses a topic named
  like the worker's global offsets topic on that cluster ("implicit usage");
- else the worker's global offsets topic.

A separate topic is read as a layer over the global one, and committed offsets are
copied to the global topic (see ``offsets.LayeredOffsetStore`` and
``kafka_io.task_clients.GlobalOffsetCopier``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.connect.runtime.client_configs import producer_bootstrap_servers
from oncelog.connect.runtime.connector_config import OFFSETS_STORAGE_TOPIC
from oncelog.connect.runtime.worker_config import BOOTSTRAP_SERVERS, OFFSET_TOPIC, WorkerConfig


@dataclass(frozen=True)
class OffsetsTopic:
    topic: str
    separate: bool  # not the worker's global offsets topic (on the worker's cluster)


def _servers(value: str) -> frozenset[str]:
    return frozenset(s.strip() for s in value.split(",") if s.strip())


def offsets_topic(worker: WorkerConfig, connector_config: Mapping[str, str]) -> OffsetsTopic:
    global_topic = str(worker.get(OFFSET_TOPIC))
    explicit = (connector_config.get(OFFSETS_STORAGE_TOPIC) or "").strip()
    if explicit:
        # Naming the global topic on the worker's own cluster is not a separate topic.
        same = explicit == global_topic and not _other_cluster(worker, connector_config)
        return OffsetsTopic(explicit, not same)
    if worker.exactly_once_source_enabled() and _other_cluster(worker, connector_config):
        return OffsetsTopic(global_topic, True)
    return OffsetsTopic(global_topic, False)


def _other_cluster(worker: WorkerConfig, connector_config: Mapping[str, str]) -> bool:
    producer = producer_bootstrap_servers(worker, connector_config)
    if not producer:
        return False
    return _servers(producer) != _servers(",".join(worker.get_list(BOOTSTRAP_SERVERS)))
