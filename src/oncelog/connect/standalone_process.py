"""The ``oncelog connect standalone`` process (Kafka's ``ConnectStandalone``): one
worker, its connectors given as files, offsets in ``offset.storage.file.filename``,
the same REST API as a distributed worker.

Start-up: the Kafka cluster is reached and its id looked up; the REST listener binds;
the offsets file is loaded; each connector file (Java properties, or JSON: either
``{"name": …, "config": {…}}`` or a flat map) is validated and created, and a failure
stops the process with the error; then one line ``oncelog connect standalone ready on
http://HOST:PORT`` is printed. On SIGTERM tasks stop (each within
``task.shutdown.graceful.timeout.ms``; source offsets are committed to the file), then
the listener closes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oncelog.connect.api.errors import ConfigException, ConnectException
from oncelog.connect.kafka_io.internal_topics import InternalTopicAdmin
from oncelog.connect.kafka_io.settings import (
    check_worker_client_settings,
    check_worker_connection,
)
from oncelog.connect.kafka_io.task_clients import TaskClients
from oncelog.connect.rest.app import create_app
from oncelog.connect.rest.listener import advertised_url, bind, start_site, warn_if_exposed
from oncelog.connect.rest.metrics import add_metrics_route
from oncelog.connect.runtime.connector_validation import validate_connector_config
from oncelog.connect.runtime.loggers import Loggers
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.rest_security import rest_security
from oncelog.connect.runtime.standalone_config import StandaloneConfig
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import (
    read_properties,
)
from oncelog.connect.standalone.herder import StandaloneHerder
from oncelog.connect.standalone.operations import StandaloneOperations
from oncelog.connect.storage.cluster_view import ClusterState
from oncelog.connect.storage.file_offset_store import FileOffsetStore
from oncelog.connect.storage.internal_log import LogRecord
from oncelog.connect.storage.memory_config_store import MemoryConfigStore
from oncelog.connect.storage.status_store import StatusStore

log = logging.getLogger(__name__)
READY = "oncelog connect standalone ready on http://{host}:{port}"
REACH_TIMEOUT_S = 30.0


class StandaloneClients(TaskClients):
    """The task clients of a standalone worker: source offsets go to the offsets file."""

    def __init__(self, config: StandaloneConfig, offsets: FileOffsetStore) -> None:
        super().__init__(config, "")
        self.file = offsets

    def offset_writer(self, connector: str) -> Any:
        return self.file

    def global_offset_copier(self) -> Any:
        return self.file

    def read_global_offsets(
        self,
        connector: str,
        connector_config: Mapping[str, str],
        apply: Callable[[LogRecord], None],
        timeout_s: float,
    ) -> None:
        raise ConnectException("Exactly-once source support is only available in distributed mode")


def read_connector_file(path: str | Path) -> tuple[str, dict[str, str]]:
    """A connector's name and config from a properties or JSON file."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigException(f"Connector configuration file {path} does not exist") from None
        except ValueError as exc:
            raise ConfigException(f"Connector configuration file {path}: {exc}") from None
        if isinstance(body, dict) and isinstance(body.get("config"), dict):
            config = {**body["config"], "name": body.get("name", body["config"].get("name"))}
        else:
            config = body
        if not isinstance(config, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in config.items() if v is not None
        ):
            raise ConfigException(f"Connector configuration file {path} must map names to strings")
    else:
        try:
            config = read_properties(path)
        except ConfigException:
            raise ConfigException(f"Connector configuration file {path} does not exist") from None
    name = str(config.get("name") or "").strip()
    if not name:
        raise ConfigException(f"Connector configuration file {path} has no 'name'")
    return name, {k: str(v) for k, v in config.items()}


async def serve(
    config: StandaloneConfig, connector_files: Sequence[str], announce: Callable[[str], None]
) -> None:
    check_worker_client_settings(config)
    security = rest_security(config, distributed=False)
    await asyncio.to_thread(check_worker_connection, config, REACH_TIMEOUT_S)
    plugins = PluginRegistry.discover(config.plugin_path())
    connectors = [read_connector_file(f) for f in connector_files]
    for name, connector_config in connectors:
        result = validate_connector_config(connector_config, plugins, config.override_policy())
        if result["error_count"]:
            errors = [
                f"{c['value']['name']}: {e}"
                for c in result["configs"]
                for e in c["value"]["errors"]
            ]
            raise ConnectException(f"Failed to create connector {name}: " + "; ".join(errors))
    admin_config = {**config.shared_client_config(), **config.originals_with_prefix("admin.")}
    admin_config.pop("listeners", None)
    cluster_id = await asyncio.to_thread(InternalTopicAdmin(admin_config).cluster_id)
    sock = bind(config.listener_urls()[0])
    warn_if_exposed(sock.getsockname()[0], security)
    host, port = sock.getsockname()[:2]
    url = advertised_url(config, host, port)
    cluster = ClusterState()
    statuses = StatusStore(None, "", None, cluster.status, cluster.lock)
    offsets = FileOffsetStore(config.offsets_file, cluster.offsets_view)
    worker = Worker(
        url.split("://", 1)[-1].rstrip("/"),
        config,
        plugins,
        StandaloneClients(config, offsets),
        cluster.offsets_view,
        statuses,
        topic_tracking=config.settings.topic_tracking_enable,
        clock=time.time,
    )
    loggers = Loggers()
    herder = StandaloneHerder(
        config,
        plugins,
        url,
        configs=MemoryConfigStore(cluster),
        statuses=statuses,
        offsets=offsets,
        worker=worker,
        loggers=loggers,
    )
    operations = StandaloneOperations(herder, cluster)
    app = create_app(
        plugins,
        override_policy=config.override_policy(),
        view=cluster,
        operations=operations,
        loggers=loggers,
        kafka_cluster_id=cluster_id,
        topic_tracking=config.settings.topic_tracking_enable,
        topic_tracking_reset=config.settings.topic_tracking_allow_reset,
        allowed_origins=config.settings.access_control_allow_origin,
        authenticator=security.authenticator,
    )
    add_metrics_route(app, worker, cluster)
    runner = await start_site(app, sock, security)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await asyncio.to_thread(herder.start)
    try:
        for name, connector_config in connectors:
            await asyncio.to_thread(operations.put_connector_config(name, connector_config).result)
        announce(READY.format(host=host, port=port))
        await stop.wait()
    finally:
        log.info("stopping the worker")
        grace_s = config.settings.task_shutdown_timeout_ms / 1000
        await asyncio.to_thread(herder.stop, grace_s * 4 + 10)
        await runner.cleanup()


def run_standalone(
    config: StandaloneConfig, connector_files: Sequence[str], announce: Callable[[str], None]
) -> None:
    asyncio.run(serve(config, connector_files, announce))
