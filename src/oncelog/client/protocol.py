"""The protocol client: the few standard Kafka calls no client library exposes.

EndTxn and InitProducerId on another producer's behalf, DescribeTransactions,
ListTransactions, DescribeProducers, WriteTxnMarkers and FindCoordinator for transactional
ids (KIP-98, KIP-664). Requests are routed as Kafka requires (FindCoordinator for the
transaction coordinator, Metadata for partition leaders), over TLS/SASL when configured,
so the same calls work against an Apache Kafka cluster.

One attempt per call: broker errors raise :class:`ClientError` with their code; callers
retry with :class:`oncelog.client.retry.RetryPolicy` (see :mod:`oncelog.client.transactions`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.api_versions.v4 import request as av
from kio.schema.describe_acls.v3 import request as da
from kio.schema.describe_configs.v1 import request as dc
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.end_txn.v3 import request as et
from kio.schema.end_txn.v5 import request as et5
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc
from kio.schema.incremental_alter_configs.v0 import request as iac
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.init_producer_id.v6 import request as ip6
from kio.schema.list_transactions.v1 import request as lt
from kio.schema.metadata.v12 import request as md
from kio.schema.offset_delete.v0 import request as od
from kio.schema.write_txn_markers.v1 import request as wm
from kio.static.primitive import i8

from oncelog.client.config import ClientConfig
from oncelog.client.errors import AuthenticationError, ClientError, check
from oncelog.client.wire import WireClient

KEY_TYPE_GROUP = 0
KEY_TYPE_TXN = 1


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class BrokerVersions:
    """What one broker's ApiVersions answer offers: the highest version of each API key and
    the finalized feature levels (``transaction.version``, ...)."""

    max_versions: dict[int, int]
    finalized: dict[str, int]

    def max_version(self, request: Any) -> int:
        """The broker's highest version of a kio request entity's API (-1: not offered)."""
        return self.max_versions.get(request.__api_key__, -1)

    def offers(self, request: Any) -> bool:
        """Does the broker accept this kio request entity's version?"""
        return self.max_version(request) >= request.__version__

    @property
    def transaction_version(self) -> int:
        return self.finalized.get("transaction.version", 0)


@dataclass(frozen=True, slots=True)
class KeptTransaction:
    """InitProducerId v6 with keepPreparedTxn (KIP-939): the caller's new identity, and the
    identity of the prepared transaction it kept (-1, -1: none was open)."""

    error: ErrorCode
    producer_id: int
    producer_epoch: int
    ongoing_producer_id: int
    ongoing_producer_epoch: int


class ProtocolClient:
    """Connections per broker, found through Metadata from any bootstrap server; connects
    lazily, and ``close()`` drops every connection (the next call reconnects)."""

    def __init__(
        self, config: ClientConfig, *, timeout: float = 30.0, client_id: str = "oncelog-admin"
    ) -> None:
        self.config = config
        self.security = config.security
        self.timeout = timeout
        self.client_id = client_id
        self._conns: dict[str, WireClient] = {}
        self._nodes: dict[int, str] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self.topics: dict[str, int] = {}

    def close(self) -> None:
        conns, self._conns = self._conns, {}
        for c in conns.values():
            try:
                c.close()
            except OSError:
                pass

    def forget_metadata(self) -> None:
        """After NOT_LEADER_OR_FOLLOWER and the like: look leaders and brokers up again."""
        self._nodes = {}
        self._leaders = {}

    def __enter__(self) -> ProtocolClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_conns": {}}

    # -- connections and routing --------------------------------------------------------
    def _connect(self, address: str) -> WireClient:
        conn = self._conns.get(address)
        if conn is None:
            conn = WireClient(
                address, timeout=self.timeout, client_id=self.client_id, security=self.security
            )
            self._conns[address] = conn
        return conn

    def bootstrap(self) -> WireClient:
        """A connection to any broker: an open one, else the first bootstrap server that answers."""
        if self._conns:
            return next(iter(self._conns.values()))
        errors = []
        for server in self.config.servers():
            try:
                return self._connect(server)
            except AuthenticationError:
                raise
            except OSError as exc:
                errors.append(f"{server}: {exc}")
        raise ClientError(
            f"cannot reach any bootstrap server ({'; '.join(errors)})", ErrorCode.network_exception
        )

    def refresh(self, only: Iterable[str] | None = None) -> dict[str, int]:
        """Metadata of every topic (or of the topics ``only`` names, kept with what is
        known of the others): {topic: partition count}, and the partition leaders."""
        names = None if only is None else tuple(sorted(set(only)))
        resp = self.bootstrap().request(
            md.MetadataRequest(
                topics=None
                if names is None
                else tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        self._nodes = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
        if names is None:
            self.topics = {}
            self._leaders = {}
        else:
            for n in names:
                self.topics.pop(n, None)
            self._leaders = {k: v for k, v in self._leaders.items() if k[0] not in names}
        for t in resp.topics:
            if t.error_code == ErrorCode.none and t.name is not None:
                self.topics[t.name] = len(t.partitions)
                for p in t.partitions:
                    self._leaders[(t.name, p.partition_index)] = p.leader_id
        return dict(self.topics)

    def node(self, node_id: int) -> WireClient:
        if node_id not in self._nodes:
            self.refresh()
        if node_id not in self._nodes:
            raise ClientError(
                f"broker {node_id} is not in the cluster metadata", ErrorCode.broker_not_available
            )
        return self._connect(self._nodes[node_id])

    def nodes(self) -> list[WireClient]:
        if not self._nodes:
            self.refresh()
        return [self.node(n) for n in sorted(self._nodes)]

    def leader_id(self, topic: str, partition: int) -> int:
        """The partition leader's node id (Metadata of the topic when not known yet)."""
        if (topic, partition) not in self._leaders:
            self.refresh([topic])
        node = self._leaders.get((topic, partition))
        if node is None or node < 0:
            raise ClientError(
                f"unknown topic-partition {topic}-{partition}", ErrorCode.unknown_topic_or_partition
            )
        return node

    def leader(self, topic: str, partition: int) -> WireClient:
        return self.node(self.leader_id(topic, partition))

    def partition_count(self, topic: str) -> int:
        """The topic's partition count (Metadata of the topic when not known yet)."""
        if topic not in self.topics:
            self.refresh([topic])
        if topic not in self.topics:
            raise ClientError(f"unknown topic {topic!r}", ErrorCode.unknown_topic_or_partition)
        return self.topics[topic]

    def api_versions(self, conn: WireClient | None = None) -> BrokerVersions:
        """ApiVersions v4 of one broker (``conn``, else any)."""
        resp = (conn or self.bootstrap()).request(
            av.ApiVersionsRequest(client_software_name="oncelog", client_software_version="1")
        )
        check(resp.error_code, "ApiVersions")
        return BrokerVersions(
            {k.api_key: k.max_version for k in resp.api_keys},
            {f.name: f.max_version_level for f in resp.finalized_features},
        )

    def find_coordinators(
        self, transactional_ids: Iterable[str], key_type: int = KEY_TYPE_TXN
    ) -> dict[str, int | ErrorCode]:
        """FindCoordinator v4 (many keys at once): node id, or the error code, per id."""
        keys = tuple(sorted(set(transactional_ids)))
        resp = self.bootstrap().request(
            fc.FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys)
        )
        out: dict[str, int | ErrorCode] = {}
        for c in resp.coordinators:
            if c.error_code == ErrorCode.none:
                self._nodes.setdefault(c.node_id, f"{c.host}:{c.port}")
                out[c.key] = c.node_id
            else:
                out[c.key] = c.error_code
        return out

    def coordinator(self, transactional_id: str, key_type: int = KEY_TYPE_TXN) -> WireClient:
        found = self.find_coordinators([transactional_id], key_type)[transactional_id]
        if isinstance(found, ErrorCode):
            raise ClientError(
                f"no coordinator for {transactional_id!r}: {found.name.upper()}", found
            )
        return self.node(found)

    # -- groups --------------------------------------------------------------------------
    def offset_delete(
        self, group_id: str, tps: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetDelete v0 at the group's coordinator: the error code of each partition
        (the request's own error, for all of them, when it has one)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(set(tps)):
            by_topic.setdefault(topic, []).append(partition)
        request = od.OffsetDeleteRequest(
            group_id=group_id,
            topics=tuple(
                od.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=tuple(
                        od.OffsetDeleteRequestPartition(partition_index=p) for p in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )
        resp = self.coordinator(group_id, KEY_TYPE_GROUP).request(request)
        out: dict[tuple[str, int], ErrorCode] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = (
                    resp.error_code if resp.error_code != ErrorCode.none else p.error_code
                )
        if resp.error_code != ErrorCode.none and not out:
            out = {tp: resp.error_code for t, ps in by_topic.items() for tp in ((t, p) for p in ps)}
        return out

    # -- transactions of other producers (KIP-98) ----------------------------------------
    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn on the producer's behalf; the broker's error code, as is."""
        return self._end_txn(et, transactional_id, producer_id, producer_epoch, commit)

    def _end_txn(
        self,
        schema: Any,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
    ) -> ErrorCode:
        request = schema.EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=commit,
        )
        code: ErrorCode = self.coordinator(transactional_id).request(request).error_code
        return code

    def keep_prepared(self, transactional_id: str) -> KeptTransaction:
        """InitProducerId v6 with enable2Pc and keepPreparedTxn: become the producer of the
        id's prepared two-phase-commit transaction without aborting it (KIP-939)."""
        resp = self.coordinator(transactional_id).request(
            ip6.InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout=datetime.timedelta(minutes=1),  # ignored for 2PC
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=True,
                keep_prepared_txn=True,
            )
        )
        return KeptTransaction(
            resp.error_code,
            int(resp.producer_id),
            int(resp.producer_epoch),
            int(resp.ongoing_txn_producer_id),
            int(resp.ongoing_txn_producer_epoch),
        )

    def end_own_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn v5 (transaction version 2) as the transaction's own producer."""
        return self._end_txn(et5, transactional_id, producer_id, producer_epoch, commit)

    def abort_two_phase(self, transactional_id: str) -> tuple[int, int]:
        """InitProducerId v6 with enable2Pc and without keepPreparedTxn: abort the id's
        prepared two-phase-commit transaction, which never times out (KIP-939)."""
        resp = self.coordinator(transactional_id).request(
            ip6.InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout=datetime.timedelta(minutes=1),  # ignored for 2PC
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=True,
                keep_prepared_txn=False,
            )
        )
        check(resp.error_code, f"InitProducerId (2PC) of {transactional_id!r}")
        return int(resp.producer_id), int(resp.producer_epoch)

    def init_producer_id(
        self, transactional_id: str, transaction_timeout: datetime.timedelta
    ) -> tuple[int, int]:
        """InitProducerId as a new instance of the producer would: bumps the epoch (fencing
        the current one) and aborts an ongoing transaction."""
        return self._init_producer_id(
            self.coordinator(transactional_id), transactional_id, transaction_timeout
        )

    def init_producer_ids_on(
        self,
        node_id: int,
        transactional_ids: Sequence[str],
        transaction_timeout: datetime.timedelta,
    ) -> dict[str, tuple[int, int] | ClientError]:
        """InitProducerId for many ids at one coordinator, pipelined (all requests sent,
        then the answers read in order): one round trip rather than one per id, as
        Kafka's admin client sends them without waiting for each other."""
        coordinator = self.node(node_id)
        sent = []
        for tid in transactional_ids:
            request = ip.InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout=transaction_timeout,
                producer_id=-1,
                producer_epoch=-1,
            )
            sent.append((tid, request, coordinator.send(request)))
        out: dict[str, tuple[int, int] | ClientError] = {}
        for tid, request, correlation_id in sent:
            resp = coordinator.receive(request, correlation_id)
            try:
                check(resp.error_code, f"InitProducerId of {tid!r}")
            except ClientError as exc:
                out[tid] = exc
                continue
            out[tid] = (int(resp.producer_id), int(resp.producer_epoch))
        return out

    def _init_producer_id(
        self,
        coordinator: WireClient,
        transactional_id: str,
        transaction_timeout: datetime.timedelta,
    ) -> tuple[int, int]:
        resp = coordinator.request(
            ip.InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout=transaction_timeout,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        check(resp.error_code, f"InitProducerId of {transactional_id!r}")
        return int(resp.producer_id), int(resp.producer_epoch)

    # -- configs ------------------------------------------------------------------------
    # For what confluent-kafka's AdminClient refuses to send: a resource with an empty
    # name, which is how Kafka names the cluster-wide default broker configs.
    def describe_configs(self, resource_type: int, name: str) -> list[Any]:
        """DescribeConfigs of one resource: its entries (kio's, with name, value,
        config_source, read_only, is_sensitive)."""
        resp = self.bootstrap().request(
            dc.DescribeConfigsRequest(
                resources=(
                    dc.DescribeConfigsResource(
                        resource_type=i8(resource_type), resource_name=name, configuration_keys=None
                    ),
                ),
                include_synonyms=False,
            )
        )
        result = resp.results[0]
        check(result.error_code, f"DescribeConfigs {name!r}: {result.error_message}")
        return list(result.configs)

    def incremental_alter_configs(
        self, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]]
    ) -> None:
        """IncrementalAlterConfigs of one resource: (config, operation, value) each
        (operations: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)."""
        resp = self.bootstrap().request(
            iac.IncrementalAlterConfigsRequest(
                resources=(
                    iac.AlterConfigsResource(
                        resource_type=i8(resource_type),
                        resource_name=name,
                        configs=tuple(
                            iac.AlterableConfig(name=k, config_operation=i8(op), value=v)
                            for k, op, v in ops
                        ),
                    ),
                ),
                validate_only=False,
            )
        )
        result = resp.responses[0]
        check(result.error_code, f"IncrementalAlterConfigs {name!r}: {result.error_message}")

    # -- ACLs -----------------------------------------------------------------------------------
    def authorizer_enabled(self) -> bool:
        """Whether the cluster has an authorizer: Kafka answers DescribeAcls with
        SECURITY_DISABLED without one (librdkafka reports that as an empty list). The filter
        matches nothing; being refused it (CLUSTER_AUTHORIZATION_FAILED) means there is one."""
        resp = self.bootstrap().request(
            da.DescribeAclsRequest(
                resource_type_filter=i8(2),  # TOPIC
                resource_name_filter="",
                pattern_type_filter=i8(3),  # LITERAL
                principal_filter=None,
                host_filter=None,
                operation=i8(1),  # ANY
                permission_type=i8(1),  # ANY
            )
        )
        return bool(resp.error_code != ErrorCode.security_disabled)

    # -- KIP-664 ----------------------------------------------------------------------------
    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, Any]:
        """DescribeTransactions, batched per coordinator: per id, its state, or the error code."""
        out: dict[str, Any] = {}
        by_node: dict[int, list[str]] = {}
        for tid, found in self.find_coordinators(transactional_ids).items():
            if isinstance(found, ErrorCode):
                out[tid] = found
            else:
                by_node.setdefault(found, []).append(tid)
        for node, ids in by_node.items():
            reply = self.node(node).request(
                dt.DescribeTransactionsRequest(transactional_ids=tuple(ids))
            )
            for state in reply.transaction_states:
                out[state.transactional_id] = (
                    state if state.error_code == ErrorCode.none else state.error_code
                )
        return out

    def list_transactions(
        self,
        states: tuple[str, ...] = (),
        producer_ids: tuple[int, ...] = (),
        min_duration_ms: int = -1,
    ) -> list[TxnListing]:
        out: list[TxnListing] = []
        for c in self.nodes():
            resp = c.request(
                lt.ListTransactionsRequest(
                    state_filters=states,
                    producer_id_filters=producer_ids,
                    duration_filter=min_duration_ms,
                )
            )
            check(resp.error_code, "ListTransactions")
            out += [
                TxnListing(s.transactional_id, s.producer_id, s.transaction_state)
                for s in resp.transaction_states
            ]
        return sorted(out, key=lambda x: x.transactional_id)

    def describe_producers(self, topic: str, partition: int) -> list[ProducerInfo]:
        resp = self.leader(topic, partition).request(
            dp.DescribeProducersRequest(
                topics=(dp.TopicRequest(name=topic, partition_indexes=(partition,)),)
            )
        )
        p = resp.topics[0].partitions[0]
        check(p.error_code, f"DescribeProducers of {topic}-{partition}")
        return [
            ProducerInfo(
                topic,
                partition,
                s.producer_id,
                s.producer_epoch,
                s.last_sequence,
                s.last_timestamp,
                s.coordinator_epoch,
                s.current_txn_start_offset,
            )
            for s in p.active_producers
        ]

    def write_txn_markers(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        commit: bool,
    ) -> None:
        marker = wm.WritableTxnMarker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=commit,
            topics=(wm.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
            coordinator_epoch=coordinator_epoch,
        )
        resp = self.leader(topic, partition).request(wm.WriteTxnMarkersRequest(markers=(marker,)))
        check(
            resp.markers[0].topics[0].partitions[0].error_code,
            f"{'COMMIT' if commit else 'ABORT'} marker for {topic}-{partition}",
        )
