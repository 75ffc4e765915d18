"""The broker process: owns config, topics and background jobs, runs the server."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from oncelog import hooks
from oncelog.broker.apis.registry import build_registry
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.authentication import Authentication
from oncelog.broker.authorizer import Authorizer
from oncelog.broker.client_faults import ClientFaultLog
from oncelog.broker.config import BrokerConfig
from oncelog.broker.connection_quotas import (
    ConnectionQuotas,
    CreationRates,
    idle,
    parse_overrides,
)
from oncelog.broker.dynamic_config import (
    CLEANER_CONFIGS,
    LOG_CONFIGS,
    PRODUCER_STATE_CONFIGS,
    SOCKET_CONFIGS,
    DynamicBrokerConfigs,
)
from oncelog.broker.fetch_sessions import FetchSessionCache
from oncelog.broker.listeners import Listener, parse_listeners
from oncelog.broker.log_cleaner import LogCleaner, partition_logs
from oncelog.broker.loop_watchdog import LoopWatchdog
from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.partition_writer import PartitionWriter
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.request_stats import RequestStats
from oncelog.broker.server import Connection
from oncelog.broker.startup import ListenError, listen_socket, lock_data_dir
from oncelog.broker.state_view import BrokerStateView
from oncelog.broker.tls import server_context
from oncelog.broker.topics import TopicRegistry
from oncelog.broker.turns import TurnScheduler
from oncelog.clock import now_ms
from oncelog.group.consumer_state import TopicInfo
from oncelog.group.group_configs import GroupConfigs
from oncelog.group.service import GroupService
from oncelog.hooks import Hook
from oncelog.protocol.frame_protocol import FrameProtocol
from oncelog.protocol.page_cache import PageWarmer
from oncelog.protocol.request_budget import RequestBudget
from oncelog.security.acl_store import AclStore
from oncelog.security.credential_store import ScramCredentialStore
from oncelog.security.principal import MappingRuleError, parse_mapping_rules, principal_from_dn
from oncelog.security.sasl import scramp
from oncelog.storage.dir_lock import DataDirLock
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.group_sync import GroupSync
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.service import TransactionService

if TYPE_CHECKING:
    from oncelog.broker.http.listener import HttpListener

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        listen: tuple[str, int] | None = None,
        advertised: tuple[str, int] | None = None,
    ) -> None:
        # --listen / --advertised: shorthand for one PLAINTEXT listener.
        if listen is not None:
            config.set("listeners", f"PLAINTEXT://{_address(listen)}")
        if advertised is not None:
            name = config.settings.listeners.split("://", 1)[0].strip().upper()
            config.set("advertised.listeners", f"{name}://{_address(advertised)}")
        self.config = config
        self.listeners: list[Listener] = parse_listeners(config)
        # Dynamic broker configs: layers over a snapshot of the static config, loaded at
        # start; ``self.config`` always holds the effective values.
        self.dynamic = DynamicBrokerConfigs.over(config, (x.name for x in self.listeners))
        self.bound_ports: dict[str, int] = {}
        self.ssl_contexts = {
            listener.name: server_context(config, listener.name)
            for listener in self.listeners
            if listener.protocol.uses_tls
        }
        self._mapping_rules = {
            listener.name: parse_mapping_rules(
                config.for_listener(listener.name, "ssl.principal.mapping.rules")
            )
            for listener in self.listeners
        }
        self.node_id = config.node_id
        self.cluster_id = config.settings.cluster_id
        self.data_dir: Path = config.data_dir
        self.topics = TopicRegistry(
            self.data_dir,
            config.topic_defaults(),
            producer_id_expiration_ms=config.settings.producer_id_expiration_ms,
            clock=now_ms,
            max_partitions=config.settings.oncelog_max_partitions,
        )
        self.producer_ids = ProducerIdAllocator(self.data_dir / "meta" / "producer_ids.json")
        self.stats = RequestStats()
        self.client_faults = ClientFaultLog(logging.getLogger("oncelog.broker.client_faults"))
        self.notifier = AppendNotifier()
        self.fetch_sessions = FetchSessionCache(
            config.settings.max_incremental_fetch_session_cache_slots
        )
        self.apis: dict[int, ApiSpec] = build_registry()
        self.turns = TurnScheduler()  # pipelined requests wait their turn (fair service)
        self.durable = _durable_acks(config)
        self.scram_credentials = ScramCredentialStore(
            self.data_dir / "meta" / "scram_credentials.json"
        )
        self.authentication = Authentication(config, self.scram_credentials)
        self.failed_authentication_delay_s = (
            config.settings.connection_failed_authentication_delay_ms / 1000
        )
        for listener in self.listeners:
            if listener.protocol.uses_sasl:
                mechanisms = self.authentication.enabled_mechanisms(listener.name)  # typos
                if any(m.startswith("SCRAM-") for m in mechanisms):
                    scramp()  # now, not in the first client's handshake
        self.authorizer = Authorizer(config, AclStore(self.data_dir / "meta" / "acls.json"))
        # The coordinators get only what they use: no Broker, no import cycle.
        self.markers = MarkerWriter(self.topics, self.notifier)
        self.txn = TransactionService(
            config.txn,
            topics=self.topics,
            markers=self.markers,
            allocate_producer_id=self.producer_ids.allocate,
            epoch_path=self.data_dir / "meta" / "coordinator_epoch.json",
            clock=now_ms,
            durable=self.durable,
        )
        group_config = config.group
        # Per-group configs (Kafka 4.0's group configs): meta/group_configs.json, loaded at
        # start; the heartbeat handler passes a group's values in to the coordinator.
        self.group_configs = GroupConfigs(group_config)
        self.group_configs_path = self.data_dir / "meta" / "group_configs.json"
        # One write of each config file at a time, each of the state as it is when its turn
        # comes: concurrent AlterConfigs must neither share the temp file nor let an older
        # state land last on disk.
        self._group_configs_saving = asyncio.Lock()
        self._dynamic_saving = asyncio.Lock()
        self.groups = GroupService(
            group_config,
            topics=self.topics,
            verify_txn=self.txn.verify_in_transaction,
            clock=now_ms,
            durable=self.durable,
            topic_metadata=self._topic_metadata,
        )
        self.writer = PartitionWriter(
            self.topics,
            verify_txn=self.txn.verify_in_transaction,
            notifier=self.notifier,
            clock=now_ms,
            durable=self.durable,
        )
        # Markers on __consumer_offsets settle the group's transactional offsets.
        self.markers.offsets_listener = self.groups.on_offsets_marker
        self.log_cleaner = LogCleaner(config.cleaner, lambda: partition_logs(self.topics.topics))
        # Metrics and console: read-only views of the services above, built at scrape time.
        self.state_view = BrokerStateView(self, now_ms)
        self.watchdog = LoopWatchdog(config.settings.oncelog_loop_stall_warn_ms / 1000)
        # Disk reads of cold fetch ranges, off the loop (see PageWarmer). A few threads:
        # they wait on the disk, not the CPU, and more would only queue there.
        self._page_reads = ThreadPoolExecutor(4, thread_name_prefix="oncelog-page-read")
        self.page_warmer = PageWarmer(self._page_reads)
        url = config.settings.metrics_listener
        self.http: HttpListener | None = None
        if url:
            # Imported only when used: aiohttp alone is ~0.3 s of every broker start.
            from oncelog.broker.http.listener import HttpListener

            self.http = HttpListener(
                self,
                self.state_view,
                url,
                allow_abort=config.settings.console_allow_abort,
                allowed_hosts=config.settings.metrics_listener_allowed_hosts,
            )
        self.dir_lock: DataDirLock | None = None
        self._debug_hooks: dict[str, Hook] = {}
        self._servers: list[asyncio.Server] = []
        self._listening: list[socket.socket] = []  # served by ``_accept``
        # Listeners served by the loop's own accept: their server and a socket of theirs
        # kept for ``_accept``, should a creation rate be set at run time.
        self._loop_served: dict[str, tuple[asyncio.Server, socket.socket, Listener]] = {}
        self._factories: dict[str, Callable[[], FrameProtocol]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._opening: set[asyncio.Task[None]] = set()  # accepted, TLS handshake under way
        self._live: dict[int, Connection] = {}
        self.quotas = ConnectionQuotas(
            max_connections=config.settings.max_connections,
            per_ip=config.settings.max_connections_per_ip,
            overrides=parse_overrides(config.settings.max_connections_per_ip_overrides),
        )
        self.creation_rates = CreationRates.from_config(config, (x.name for x in self.listeners))

    def _topic_metadata(self) -> dict[str, TopicInfo]:
        """What the consumer group protocol assigns from: non-internal topics."""
        return {
            name: TopicInfo(t.topic_id, len(t.partitions))
            for name, t in self.topics.topics.items()
            if not t.internal
        }

    def listener(self, name: str) -> Listener:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        return self.listeners[0]

    def advertised_address(self, listener_name: str) -> tuple[str, int]:
        """What Metadata/FindCoordinator tell a client of ``listener_name``."""
        listener = self.listener(listener_name)
        port = listener.advertised_port
        if port is None:
            port = self.bound_ports.get(listener.name, listener.port)
        return listener.advertised_host, port

    @property
    def listen(self) -> tuple[str, int]:
        first = self.listeners[0]
        return first.host, self.bound_ports.get(first.name, first.port)

    def ready_line(self) -> str:
        return "oncelog broker ready on " + ", ".join(
            listener.describe(self.bound_ports[listener.name]) for listener in self.listeners
        )

    def principal_from_dn(self, listener_name: str, dn: str) -> str:
        return principal_from_dn(dn, self._mapping_rules[listener_name])

    # -- lifecycle ---------------------------------------------------------
    async def start(self) -> None:
        # Every listener is bound first and the data directory locked next, before anything
        # in it is read or written: a port conflict or a second broker on the same
        # directory then changes nothing (Kafka's LogManager locks its log dirs first).
        sockets = [self._bind(listener) for listener in self.listeners]
        http_socket = self.http.bind() if self.http is not None else None
        try:
            self.dir_lock = lock_data_dir(self.data_dir)
        except BaseException:
            for sock in sockets:
                sock.close()
            if http_socket is not None:
                http_socket.close()
            raise
        logging.getLogger("oncelog.broker").info(
            "effective config (non-default): %s", self.config.non_default_summary()
        )
        # Before any log opens: the logs take the dynamic topic defaults from the start.
        self.dynamic.load()
        await self.reconfigure(self.dynamic.effective())
        # The oncelog.debug.* test hooks (none by default), for this process's lifetime.
        self._debug_hooks = self.config.debug.hooks()
        for name, hook in self._debug_hooks.items():
            hooks.install(name, hook)
        if self.group_configs_path.exists():
            for group_id in self.group_configs.load_json(self.group_configs_path.read_bytes()):
                log.error("ignoring the stored configs of group %s: no longer valid", group_id)
        self.topics.load()
        self.producer_ids.load()
        self.scram_credentials.load()
        self.authorizer.store.load()
        # In the background, as Kafka loads a coordinator partition while the broker serves:
        # a partition's requests answer COORDINATOR_LOAD_IN_PROGRESS until it is loaded.
        # Markers that the transaction coordinator's load writes to __consumer_offsets
        # meanwhile are read by that partition's last pass (see coordinator.loader).
        self.groups.start(background=True)
        self.txn.start(background=True)
        max_size = self.config.settings.socket_request_max_bytes
        budget = RequestBudget(
            self.config.settings.queued_max_requests,
            self.config.settings.queued_max_request_bytes,
        )
        loop = asyncio.get_running_loop()
        for listener, sock in zip(self.listeners, sockets, strict=True):

            def factory(listener: Listener = listener) -> FrameProtocol:
                return FrameProtocol(
                    max_size,
                    lambda p: self._on_connect(p, listener),
                    budget=budget,
                    sendfile=not listener.protocol.uses_tls,  # TLS: encrypted bytes only
                    warmer=self.page_warmer,
                )

            # Clients that connected during the load waited in the listen backlog.
            self.bound_ports[listener.name] = sock.getsockname()[1]
            self._factories[listener.name] = factory
            if listener.protocol.uses_tls or self.creation_rates.limits(listener.name):
                sock.setblocking(False)
                self._listening.append(sock)
                self._tasks.append(asyncio.create_task(self._accept(sock, listener, factory)))
            else:
                # Nothing to wait for or to see fail: the loop's own accept, cheaper per
                # connection (a storm of connect-request-close: ~12,700/s against
                # ~10,400/s through ``_accept``). The server gets a duplicate descriptor:
                # closing it leaves the socket (and its backlog) to ``_accept``.
                server = await loop.create_server(factory, sock=sock.dup())
                self._servers.append(server)
                self._loop_served[listener.name] = (server, sock, listener)
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._tasks.append(asyncio.create_task(self._expire_idle_connections()))
        self.log_cleaner.start()
        self.watchdog.start()
        if self.http is not None:
            assert http_socket is not None
            await self.http.start(http_socket)

    @staticmethod
    def _bind(listener: Listener) -> socket.socket:
        """A listening socket for ``listener`` (an empty host: every interface)."""
        try:
            return listen_socket(listener.host, listener.port, backlog=1024)
        except OSError as exc:
            raise ListenError(listener.name, listener.host, listener.port, exc) from exc

    async def _accept(
        self, sock: socket.socket, listener: Listener, factory: Callable[[], FrameProtocol]
    ) -> None:
        """The acceptor of a TLS or rate-limited listener (Kafka's ``Acceptor``): one
        connection at a time, and past ``max.connection.creation.rate`` it waits before
        taking the next, which meanwhile stays in the listen backlog (Kafka's
        ``ConnectionQuotas.inc`` blocks the acceptor; no connection is refused for the
        rate). TLS handshakes run in their own tasks, so their failures can be seen."""
        loop = asyncio.get_running_loop()
        rates = self.creation_rates
        in_a_row = 0
        while True:
            in_a_row += 1
            if in_a_row % 64 == 0:
                await asyncio.sleep(0)  # a long backlog must not hold the loop
            try:
                try:
                    # Pending connections are taken straight away: sock_accept alone
                    # costs a reader registration and a loop turn for each.
                    conn, address = sock.accept()
                    conn.setblocking(False)
                except BlockingIOError:
                    in_a_row = 0
                    conn, address = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno in _ACCEPT_RESOURCE_ERRNOS:
                    # Out of file descriptors or memory: retrying at once would spin.
                    log.error("accepting on %s failed: %s; retrying in 1 s", listener.name, exc)
                    await asyncio.sleep(1.0)
                continue  # ECONNABORTED and the like: the client is gone
            if rates.limits(listener.name):
                delay_ms = rates.record(listener.name, int(loop.time() * 1000))
                if delay_ms > 0:
                    self.stats.connections_throttled += 1
                    try:
                        await asyncio.sleep(delay_ms / 1000)
                    except asyncio.CancelledError:  # shutdown: not handed over yet
                        conn.close()
                        raise
            task = loop.create_task(self._open(conn, address, listener, factory))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(
        self,
        conn: socket.socket,
        address: object,
        listener: Listener,
        factory: Callable[[], FrameProtocol],
    ) -> None:
        """Attach an accepted socket to the loop; on a TLS listener, after the handshake.
        The transport owns (and closes) the socket from here on."""
        ctx = self.ssl_contexts.get(listener.name)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(factory, conn, ssl=ctx)
        except ssl.SSLError as exc:
            if ctx is None or not _handshake_failure(exc):
                return
            # Kafka's SslTransportLayer turns a failed handshake (an untrusted or missing
            # client certificate, a plaintext client, a fatal alert) into an
            # SslAuthenticationException, which its Selector counts as a failed
            # authentication and logs; the connection is closed at once, without
            # connection.failed.authentication.delay.ms (that is for SASL only).
            self.stats.failed_authentications += 1
            peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
            self.client_faults.note(
                "failed SSL handshakes", logging.INFO,
                "Failed authentication with %s (SSL handshake failed on listener %s: %s)",
                peer, listener.name, _ssl_reason(exc),
            )  # fmt: skip
        except (TimeoutError, OSError) as exc:
            # The client went away during the handshake: a disconnection, as Kafka's
            # Selector sees an IOException, not a failed authentication.
            log.debug(
                "connection from %s on %s closed during set-up: %r", address, listener.name, exc
            )
        except Exception:  # a bug, not the client: said at once, not at garbage collection
            log.exception("setting up a connection from %s on %s failed", address, listener.name)

    def _on_connect(self, protocol: FrameProtocol, listener: Listener) -> None:
        """Start the connection's request loop once the transport is attached, unless a
        connection limit refuses it (closed at once, as Kafka's ConnectionQuotas)."""
        assert protocol.transport is not None
        peer = protocol.transport.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        refused = self.quotas.admit(host)
        if refused is not None:
            self.client_faults.note(
                "connections refused by a connection limit", logging.INFO,
                "refusing a connection from %s: %s", host, refused,
            )  # fmt: skip
            self.stats.connections_refused += 1
            _drop(protocol)
            return
        try:
            connection = Connection(self, protocol, listener)
        except MappingRuleError as exc:
            # Kafka fails the TLS authentication of a certificate no rule maps: one log
            # line (per window), not a traceback from the transport callback.
            self.quotas.release(host)
            self.client_faults.note(
                "connections with an unmapped certificate", logging.INFO,
                "closing connection from %s on %s: %s", host, listener.name, exc,
            )  # fmt: skip
            _drop(protocol)
            return
        self._live[connection.id] = connection
        self.stats.connections_opened += 1  # closed: ``on_connection_closed``
        task = asyncio.get_running_loop().create_task(connection.serve())
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    def on_connection_closed(self, connection_id: int) -> None:
        self.stats.connections_closed += 1
        connection = self._live.pop(connection_id, None)
        if connection is not None:
            self.quotas.release(connection.session.client_host)

    # -- dynamic broker configs --------------------------------------------------------
    async def alter_dynamic(
        self, per_broker: bool, props: dict[str, str], *, validate_only: bool
    ) -> None:
        """Replace one dynamic layer (per broker, or the cluster default) with ``props``:
        validated as Kafka's ConfigAdminManager does (DynamicConfigError: refused),
        persisted, then applied without a restart."""
        overrides = [t.configs for t in self.topics.topics.values()]
        new = self.dynamic.check(props, per_broker, self.config, overrides)
        if validate_only:
            return
        layer = self.dynamic.layer(per_broker)
        layer.clear()
        layer.update(props)
        async with self._dynamic_saving:
            await asyncio.to_thread(self.dynamic.save, self.dynamic.data())
        log.info(
            "dynamic broker configs (%s) now: %s",
            "broker" if per_broker else "cluster default",
            ", ".join(f"{k}={v}" for k, v in sorted(props.items())) or "(none)",
        )
        await self.reconfigure(new)

    async def save_group_configs(self) -> None:
        async with self._group_configs_saving:
            data = self.group_configs.to_json()
            await asyncio.to_thread(atomic_write, self.group_configs_path, data)

    async def reconfigure(self, new: BrokerConfig) -> None:
        """Make ``new``'s values the effective config and apply what changed: each
        group as its Kafka BrokerReconfigurable does."""
        old = dict(self.config.values)
        self.config.adopt(new)
        changed = {k for k, v in new.values.items() if old.get(k) != v} | (
            set(old) - set(new.values)
        )
        if changed & LOG_CONFIGS:
            # DynamicLogConfig: every log's config is rebuilt from the new defaults
            self.topics.set_topic_defaults(self.config.topic_defaults())
        if changed & PRODUCER_STATE_CONFIGS:
            self.topics.set_producer_id_expiration_ms(
                self.config.settings.producer_id_expiration_ms
            )
        if changed & CLEANER_CONFIGS:
            # LogCleaner.reconfigure: the threads restart (joining them may take a while)
            await asyncio.to_thread(self.log_cleaner.reconfigure, self.config.cleaner)
        if changed & SOCKET_CONFIGS or any(k.startswith("listener.name.") for k in changed):
            # SocketServer.reconfigure: the connection limits and creation rates
            self.quotas.max_connections = self.config.settings.max_connections
            self.quotas.per_ip = self.config.settings.max_connections_per_ip
            self.quotas.overrides = parse_overrides(
                self.config.settings.max_connections_per_ip_overrides
            )
            self.creation_rates = CreationRates.from_config(
                self.config, (x.name for x in self.listeners)
            )
            self._accept_rate_limited()

    def _accept_rate_limited(self) -> None:
        """A listener that now has a creation rate is served by ``_accept`` from here on
        (the loop's accept cannot wait between connections)."""
        for name, (server, sock, listener) in list(self._loop_served.items()):
            if not self.creation_rates.limits(name):
                continue
            del self._loop_served[name]
            server.close()  # its descriptor only: the socket and its backlog stay
            sock.setblocking(False)
            self._listening.append(sock)
            factory = self._factories[name]
            self._tasks.append(asyncio.create_task(self._accept(sock, listener, factory)))

    async def _expire_idle_connections(self) -> None:
        """Close connections idle for ``connections.max.idle.ms`` (-1: never), as
        Kafka's Selector does."""
        idle_s = self.config.settings.connections_max_idle_ms / 1000
        if idle_s < 0:
            return
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 30.0))
            last = {cid: c.last_active for cid, c in self._live.items()}
            for cid in idle(last, asyncio.get_running_loop().time(), idle_s):
                connection = self._live.get(cid)
                if connection is not None:
                    log.debug("closing connection %s from %s: idle", cid, connection.peer)
                    connection.close_idle()

    async def stop(self) -> None:
        # Shutdown closes every partition on the loop (hundreds of milliseconds with many
        # partitions) while no client is served any more: not a stall worth a stack.
        self.watchdog.stop()
        if self.http is not None:
            await self.http.stop()
        for server in self._servers:
            server.close()
        for task in [*self._tasks, *self._opening, *self._connections]:
            task.cancel()
        await asyncio.gather(
            *self._tasks, *self._opening, *self._connections, return_exceptions=True
        )
        for sock in self._listening:  # no acceptor uses them any more
            sock.close()
        for _, sock, _ in self._loop_served.values():  # their servers closed duplicates
            sock.close()
        await self.txn.stop()
        await self.groups.stop()
        await asyncio.to_thread(self.log_cleaner.stop)
        self._page_reads.shutdown(wait=True)
        self.topics.close()
        self.client_faults.close()
        if self.dir_lock is not None:
            self.dir_lock.release()  # everything in the directory is closed
        for name, hook in self._debug_hooks.items():
            hooks.uninstall(name, hook)

    async def _housekeeping(self) -> None:
        """Flush scheduler, retention and producer-id expiration, as Kafka's LogManager."""
        flush_every = self.config.settings.log_flush_scheduler_interval_ms / 1000
        retention_every = self.config.settings.log_retention_check_interval_ms
        expire_every = self.config.settings.producer_id_expiration_check_interval_ms
        last_retention = last_expire = now_ms()
        while True:
            await asyncio.sleep(flush_every)
            now = now_ms()
            self.client_faults.flush()
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


# accept() errors that say the process is out of a resource, not that a client left.
_ACCEPT_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _handshake_failure(exc: ssl.SSLError) -> bool:
    """A TLS handshake refused for what the client sent, not the client going away
    (Kafka's ``SslTransportLayer.maybeProcessHandshakeFailure``: an EOF or reset is an
    IOException, a disconnection)."""
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError):
        return False
    return exc.reason != "UNEXPECTED_EOF_WHILE_READING"


def _ssl_reason(exc: ssl.SSLError) -> str:
    """``CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate``: OpenSSL's
    reason code, and for a refused certificate what was wrong with it."""
    reason = exc.reason or str(exc)
    verify = getattr(exc, "verify_message", None)
    return f"{reason}: {verify}" if verify else reason


def _drop(protocol: FrameProtocol) -> None:
    """Close a connection refused before its request loop started."""
    protocol.close()
    protocol.release()


def _durable_acks(config: BrokerConfig) -> GroupSync | None:
    """``oncelog.flush.on.ack``: the group-commit syncer every durable answer waits on."""
    if not config.settings.oncelog_flush_on_ack:
        return None
    return GroupSync()


def _address(host_port: tuple[str, int]) -> str:
    host, port = host_port
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
