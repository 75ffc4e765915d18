"""The ``oncelog connect worker`` process (Kafka's ``ConnectDistributed``): the one place
where the distributed worker is put together; every collaborator is built here and
injected.

Order of start-up, as in Kafka:

1. the internal topics are created when missing (compacted, Kafka's partition
   counts) and refused when not compacted; the Kafka cluster's id is looked up;
2. the REST listener binds (port 0 picks a free port); it also serves Prometheus metrics
   at ``/metrics`` (docs/metrics.md);
3. the herder reads the internal topics and joins the group;
4. one line ``oncelog connect worker ready on http://HOST:PORT`` is printed.

On SIGTERM the herder stops tasks (each within ``task.shutdown.graceful.timeout.ms``)
and leaves the group, then the listener closes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import time
from collections.abc import Callable, Mapping, Sequence

from oncelog.connect.distributed import zombie_fencing
from oncelog.connect.distributed.connect_protocol import ConnectProtocolVersion
from oncelog.connect.distributed.herder import READ_TIMEOUT_S, Herder
from oncelog.connect.distributed.membership import ConnectGroupMember
from oncelog.connect.distributed.operations import DistributedOperations
from oncelog.connect.kafka_io.internal_topics import (
    InternalTopicAdmin,
    TopicLogConsumer,
    TopicWriter,
    TransactionalTopicWriter,
)
from oncelog.connect.kafka_io.settings import (
    check_worker_client_settings,
    check_worker_connection,
    client_config,
)
from oncelog.connect.kafka_io.task_clients import ProducerFencer, TaskClients
from oncelog.connect.rest.app import create_app
from oncelog.connect.rest.listener import advertised_url, bind, start_site, warn_if_exposed
from oncelog.connect.rest.metrics import add_metrics_route
from oncelog.connect.runtime import client_configs
from oncelog.connect.runtime.loggers import Loggers
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.rest_security import rest_security
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.config_store import ConfigStore
from oncelog.connect.storage.config_writer import PrivilegedLogWriter
from oncelog.connect.storage.offset_store import OffsetStore
from oncelog.connect.storage.status_store import StatusStore

log = logging.getLogger(__name__)
READY = "oncelog connect worker ready on http://{host}:{port}"
# How long a starting worker waits for an unreachable cluster (a refused TLS/SASL handshake
# fails at once).
REACH_TIMEOUT_S = 30.0


def build_herder(
    config: WorkerConfig,
    plugins: PluginRegistry,
    url: str,
    cluster: ClusterState | None = None,
    rest_ssl: ssl.SSLContext | None = None,
) -> Herder:
    """The distributed herder and everything it drives."""
    cluster = cluster or ClusterState()
    shared = config.shared_client_config()
    topics = config.internal_topics()
    config_topic, offsets_topic, status_topic = (
        topics["config"][0],
        topics["offsets"][0],
        topics["status"][0],
    )
    protocol = ConnectProtocolVersion.from_config(config.settings.connect_protocol)
    group_id = config.settings.group_id
    worker_id = url.split("://", 1)[-1].rstrip("/")
    support = zombie_fencing.exactly_once_source_support(config)
    privileged: Callable[[], PrivilegedLogWriter] | None = None
    if support.transactional_leader:
        leader_id = zombie_fencing.leader_transactional_id(group_id)
        privileged = lambda: TransactionalTopicWriter(shared, config_topic, leader_id)  # noqa: E731
    configs = ConfigStore(
        # Kafka's KafkaConfigBackingStore reads read_committed only with exactly-once
        # support enabled (a preparing leader already writes transactionally). Its end
        # offsets are then the high watermarks, as KafkaBasedLog lists them: the broker
        # answers EndTxn before it writes the commit marker, so a read to the last stable
        # offset right after the leader's write could stop short of that write (and
        # POST /connectors answer 404 for the connector it just created).
        TopicLogConsumer(
            shared,
            read_committed=config.exactly_once_source_enabled(),
            high_watermark_ends=config.exactly_once_source_enabled(),
        ),
        config_topic,
        cluster,
        TopicWriter(shared, config_topic),
        privileged,
        timeout_s=READ_TIMEOUT_S,
    )
    statuses = StatusStore(
        TopicLogConsumer(shared),
        status_topic,
        TopicWriter(shared, status_topic),
        cluster.status,
        cluster.lock,
        timeout_s=READ_TIMEOUT_S,
    )
    offsets = OffsetStore(
        TopicLogConsumer(shared),
        offsets_topic,
        cluster,
        TopicWriter(shared, offsets_topic),
        timeout_s=READ_TIMEOUT_S,
    )
    member = ConnectGroupMember(
        client_config(shared),
        group_id,
        session_timeout_ms=config.settings.session_timeout_ms,
        rebalance_timeout_ms=config.settings.rebalance_timeout_ms,
        client_id=f"connect-{worker_id}",
    )
    worker = Worker(
        worker_id,
        config,
        plugins,
        TaskClients(config, offsets_topic),
        cluster.offsets_view,
        statuses,
        generation=lambda: member.generation,
        topic_tracking=config.settings.topic_tracking_enable,
        clock=time.time,
    )

    def fence_producers(
        connector: str, connector_config: Mapping[str, str], ids: Sequence[str]
    ) -> None:
        admin = client_configs.connector_admin_config(config, connector, connector_config)
        ProducerFencer(admin).fence(ids)

    return Herder(
        config,
        plugins,
        url,
        protocol=protocol,
        member=member,
        configs=configs,
        statuses=statuses,
        offsets=offsets,
        worker=worker,
        fence_producers=fence_producers,
        exactly_once=support.enabled,
        group_id=group_id,
        loggers=Loggers(),
        rest_ssl=rest_ssl,
    )


async def serve(config: WorkerConfig, announce: Callable[[str], None]) -> None:
    check_worker_client_settings(config)
    security = rest_security(config, distributed=True)
    await asyncio.to_thread(check_worker_connection, config, REACH_TIMEOUT_S)
    plugins = PluginRegistry.discover(config.plugin_path())
    admin_config = {**config.shared_client_config(), **config.originals_with_prefix("admin.")}
    admin_config.pop("listeners", None)
    admin = InternalTopicAdmin(admin_config)
    await asyncio.to_thread(admin.ensure, config.internal_topics())
    cluster_id = await asyncio.to_thread(admin.cluster_id)
    sock = bind(config.listener_urls()[0])
    host, port = sock.getsockname()[:2]
    warn_if_exposed(host, security)
    cluster = ClusterState()
    herder = build_herder(
        config, plugins, advertised_url(config, host, port), cluster, security.client_ssl
    )
    operations = DistributedOperations(herder, cluster)
    app = create_app(
        plugins,
        override_policy=config.override_policy(),
        exactly_once_source=config.settings.exactly_once_source_support,
        view=cluster,
        operations=operations,
        loggers=herder.loggers,
        kafka_cluster_id=cluster_id,
        topic_tracking=config.settings.topic_tracking_enable,
        topic_tracking_reset=config.settings.topic_tracking_allow_reset,
        allowed_origins=config.settings.access_control_allow_origin,
        authenticator=security.authenticator,
        client_ssl=security.client_ssl,
    )
    add_metrics_route(app, herder.worker, cluster)
    runner = await start_site(app, sock, security)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    herder.start()
    try:
        while not herder.joined.is_set():
            if stop.is_set() or herder.stopped.is_set():
                return
            await asyncio.sleep(0.05)
        announce(READY.format(host=host, port=port))
        while not stop.is_set() and not herder.stopped.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass
    finally:
        log.info("stopping the worker")
        grace_s = config.settings.task_shutdown_timeout_ms / 1000
        await asyncio.to_thread(herder.stop, grace_s * 4 + 10)
        await runner.cleanup()


def run_worker(config: WorkerConfig, announce: Callable[[str], None]) -> None:
    asyncio.run(serve(config, announce))
