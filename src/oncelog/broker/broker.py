"""The broker process: owns config, topics and background jobs, runs the server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from oncelog.broker.config import BrokerConfig, parse_host_port
from oncelog.broker.fetch_sessions import FetchSessionCache
from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.server import Connection, Handler
from oncelog.broker.topics import Topic, TopicRegistry
from oncelog.clock import now_ms
from oncelog.metrics import Registry
from oncelog.protocol.framing import FrameProtocol

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        listen: tuple[str, int],
        advertised: tuple[str, int] | None = None,
    ) -> None:
        self.config = config
        self.listen = listen
        self.advertised = advertised
        self.node_id = config.node_id
        self.cluster_id = config.get_str("cluster.id")
        self.data_dir: Path = config.data_dir
        self.metrics = Registry()
        self.topics = TopicRegistry(
            self.data_dir,
            config.topic_defaults(),
            producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
        )
        self.producer_ids = ProducerIdAllocator(self.data_dir / "meta" / "producer_ids.json")
        self.notifier = AppendNotifier()
        self.fetch_sessions = FetchSessionCache(config.get_int("max.incremental.fetch.session.cache.slots"))
        self.apis: dict[int, tuple[int, int, Handler]] = {}
        from oncelog.txn.service import TransactionService

        self.txn = TransactionService(self)
        from oncelog.group.service import GroupService

        self.groups = GroupService(self)
        self.txn.offsets_marker_hook = self.groups.on_offsets_marker
        self._register_metrics()
        self._server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        from oncelog.broker.handlers import register_all

        register_all(self)

    def _register_metrics(self) -> None:
        """KIP-98's transaction metrics, read by a later HTTP exporter."""

        def partitions() -> dict[str, tuple[int, int]]:
            return {
                f"{t.name}-{i}": (p.high_watermark, p.last_stable_offset)
                for t in self.topics.topics.values()
                for i, p in enumerate(t.partitions)
            }

        self.metrics.gauge(
            "live_producer_ids",
            lambda: len({e.producer_id for t in self.topics.topics.values() for p in t.partitions for e in p.producer_state.producers()}),
        )
        self.metrics.gauge("active_transactional_ids", lambda: self.txn.coordinator.num_transactional_ids)
        self.metrics.gauge("ongoing_transactions", lambda: self.txn.coordinator.num_ongoing)
        self.metrics.gauge("last_stable_offset", lambda: {k: lso for k, (_, lso) in partitions().items()})
        self.metrics.gauge("last_stable_offset_lag", lambda: {k: hw - lso for k, (hw, lso) in partitions().items()})

    def register(self, api_key: int, versions: tuple[int, int], handler: Handler) -> None:
        self.apis[api_key] = (versions[0], versions[1], handler)

    def api_version_entries(self, mod: Any) -> tuple[Any, ...]:
        from oncelog.protocol.messages import make

        return tuple(
            make(mod.ApiVersion, api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi, _) in sorted(self.apis.items())
        )

    @property
    def advertised_address(self) -> tuple[str, int]:
        if self.advertised:
            return self.advertised
        adv = self.config.get_str("advertised.listeners")
        if adv:
            return parse_host_port(adv.split(",")[0])
        host, port = self.listen
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return host, port

    # -- lifecycle ---------------------------------------------------------
    def ensure_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics.create(name, partitions, configs, now_ms=now_ms())
            assert topic is not None
            log.info("created internal topic %s with %d partitions", name, partitions)
        return topic

    async def start(self) -> None:
        self.topics.load(now_ms())
        self.producer_ids.load()
        self.groups.start()  # before transactions: completing prepared ones marks offsets
        self.txn.start()
        self._tasks.append(asyncio.create_task(self.txn.expire_forever()))
        self._tasks.append(asyncio.create_task(self.groups.tick_forever()))
        host, port = self.listen
        loop = asyncio.get_running_loop()
        max_size = self.config.get_int("socket.request.max.bytes")
        self._server = await loop.create_server(lambda: FrameProtocol(max_size, self._on_connect), host, port, backlog=1024)
        sock = self._server.sockets[0].getsockname()
        self.listen = (host, sock[1])
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        from oncelog.broker.log_cleaner import CleanerSettings, LogCleaner, partition_logs

        settings = CleanerSettings.from_config(self.config)
        self.log_cleaner = LogCleaner(settings, lambda: partition_logs(self.topics.topics))
        self.log_cleaner.start()

    def _on_connect(self, protocol: FrameProtocol) -> None:
        """Start the connection's request loop once the transport is attached."""
        task = asyncio.get_running_loop().create_task(Connection(self, protocol).serve())
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    def on_connection_closed(self, connection_id: int) -> None:
        pass

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in [*self._tasks, *self._connections]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._connections, return_exceptions=True)
        await self.txn.stop()
        if hasattr(self, "log_cleaner"):
            await asyncio.to_thread(self.log_cleaner.stop)
        self.topics.close()

    async def _housekeeping(self) -> None:
        """Flush scheduler, retention and producer-id expiration, as Kafka's LogManager."""
        flush_every = self.config.get_int("log.flush.scheduler.interval.ms") / 1000
        retention_every = self.config.get_int("log.retention.check.interval.ms")
        expire_every = self.config.get_int("producer.id.expiration.check.interval.ms")
        last_retention = last_expire = now_ms()
        while True:
            await asyncio.sleep(flush_every)
            now = now_ms()
            for topic in list(self.topics.topics.values()):
                for part in topic.partitions:
                    try:
                        part.maybe_flush(now)
                        if now - last_retention >= retention_every:
                            part.apply_retention(now)
                        if now - last_expire >= expire_every:
                            part.producer_state.expire(now)
                    except Exception:
                        log.exception("housekeeping failed for %s", topic.name)
            if now - last_retention >= retention_every:
                last_retention = now
            if now - last_expire >= expire_every:
                last_expire = now
