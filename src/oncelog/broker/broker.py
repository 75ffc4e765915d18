"""The broker process: owns config, topics and background jobs, runs the server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from oncelog.broker.apis.registry import build_registry
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.config import BrokerConfig, parse_host_port
from oncelog.broker.fetch_sessions import FetchSessionCache
from oncelog.broker.log_cleaner import CleanerSettings, LogCleaner, partition_logs
from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.server import Connection
from oncelog.broker.topics import TopicRegistry
from oncelog.clock import now_ms
from oncelog.group.config import GroupConfig
from oncelog.group.service import GroupService
from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.txn.config import TxnConfig
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.service import TransactionService

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
        self.topics = TopicRegistry(
            self.data_dir,
            config.topic_defaults(),
            producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
        )
        self.producer_ids = ProducerIdAllocator(self.data_dir / "meta" / "producer_ids.json")
        self.notifier = AppendNotifier()
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.apis: dict[int, ApiSpec] = build_registry()
        # The coordinators get only what they use: no Broker, no import cycle.
        self.markers = MarkerWriter(self.topics, self.notifier)
        self.txn = TransactionService(
            TxnConfig.from_properties(config.values),
            topics=self.topics,
            markers=self.markers,
            allocate_producer_id=self.producer_ids.allocate,
            epoch_path=self.data_dir / "meta" / "coordinator_epoch.json",
            clock=now_ms,
        )
        self.groups = GroupService(
            GroupConfig.from_properties(config.values),
            topics=self.topics,
            verify_txn=self.txn.verify_in_transaction,
            clock=now_ms,
        )
        # Markers on __consumer_offsets settle the group's transactional offsets.
        self.markers.offsets_listener = self.groups.on_offsets_marker
        self.log_cleaner = LogCleaner(
            CleanerSettings.from_config(config), lambda: partition_logs(self.topics.topics)
        )
        self._server: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()

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
    async def start(self) -> None:
        self.topics.load(now_ms())
        self.producer_ids.load()
        self.groups.start()  # before transactions: completing prepared ones marks offsets
        self.txn.start()
        host, port = self.listen
        loop = asyncio.get_running_loop()
        max_size = self.config.get_int("socket.request.max.bytes")
        self._server = await loop.create_server(
            lambda: FrameProtocol(max_size, self._on_connect), host, port, backlog=1024
        )
        sock = self._server.sockets[0].getsockname()
        self.listen = (host, sock[1])
        self._tasks.append(asyncio.create_task(self._housekeeping()))
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
        await self.groups.stop()
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
