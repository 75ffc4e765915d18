"""Topics and offsets through confluent-kafka's AdminClient, with the retry policy.

Metadata, ListOffsets (earliest / latest, read_committed or not), CreateTopics,
CreatePartitions, DeleteTopics and DescribeConfigs: all of them librdkafka offers, so this
module only adds typed results, error codes and retries.

``fence_producers`` (KIP-618's ``Admin.fenceProducers``) is the one call librdkafka lacks:
it goes through the protocol client (FindCoordinator + InitProducerId).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError, from_kafka_error
from oncelog.client.retry import DEFAULT_POLICY, RetryPolicy

if TYPE_CHECKING:
    # Imported when first needed: the protocol client's message schemas cost ~60 ms to
    # import, paid by every Spark streaming query's source process, which never uses them.
    from oncelog.client.protocol import ProtocolClient

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
EARLIEST, LATEST = "earliest", "latest"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    leaders: dict[int, int]  # partition -> leader node id

    @property
    def partitions(self) -> int:
        return len(self.leaders)


@dataclass(frozen=True, slots=True)
class ConfigInfo:
    name: str
    value: str | None  # None for sensitive entries
    source: str  # DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...
    is_default: bool
    read_only: bool
    sensitive: bool


# Kafka's ConfigResource.Type ids, by confluent-kafka's resource type names.
_RESOURCE_TYPES = {"topic": 2, "broker": 4, "group": 32}


def _source_name(source: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


class FenceProducersError(ClientError):
    """Some transactional ids could not be fenced (the others were): ``fenced`` and
    ``failed`` hold every id's outcome, as Kafka's ``FenceProducersResult``."""

    def __init__(self, fenced: dict[str, tuple[int, int]], failed: dict[str, ClientError]) -> None:
        first = failed[min(failed)]
        reasons = "; ".join(f"{tid!r}: {exc}" for tid, exc in sorted(failed.items()))
        super().__init__(
            f"fencing producers failed for {len(failed)} transactional id(s): {reasons}",
            first.error_code,
            retriable=False,
        )
        self.fenced = fenced
        self.failed = failed


class Admin:
    """One lazily created AdminClient; cheap to create, pickle-safe."""

    def __init__(
        self, config: ClientConfig, *, policy: RetryPolicy = DEFAULT_POLICY, timeout: float = 30.0
    ) -> None:
        self.config = config
        self.policy = policy
        self.timeout = timeout
        self._client: Any = None
        self._protocol: ProtocolClient | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from confluent_kafka.admin import AdminClient

            # Connected to every broker at once, like the data source's other clients.
            self._client = AdminClient(
                {"enable.sparse.connections": False, **self.config.librdkafka()}
            )
        return self._client

    def close(self) -> None:
        self._client = None  # librdkafka's AdminClient closes when collected
        if self._protocol is not None:
            self._protocol.close()
            self._protocol = None

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def serve_logs(self) -> None:
        """Hand librdkafka's pending log lines to Python logging (they reach it only when the
        client is polled); nothing when no client was created."""
        if self._client is not None:
            self._client.poll(0)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_protocol": None}

    def await_result(self, future: Any, what: str) -> Any:
        """The result of one of the AdminClient's futures, or its ClientError."""
        from confluent_kafka import KafkaException

        try:
            return future.result(self.timeout)
        except KafkaException as exc:
            raise from_kafka_error(exc, what) from exc

    # -- metadata --------------------------------------------------------------------------
    def cluster_id(self) -> str:
        """The cluster's id (DescribeCluster, KIP-700)."""
        return str(
            self.policy.call(
                lambda: self.await_result(self.client.describe_cluster(), "DescribeCluster")
            ).cluster_id
        )

    def describe_topics(self) -> dict[str, TopicInfo]:
        """Metadata of every topic (listing all: naming one could auto-create it)."""
        from confluent_kafka import KafkaException

        def once() -> dict[str, TopicInfo]:
            try:
                md = self.client.list_topics(timeout=self.timeout)
            except KafkaException as exc:
                raise from_kafka_error(exc, "Metadata") from exc
            return {
                name: TopicInfo(name, {p: pm.leader for p, pm in t.partitions.items()})
                for name, t in md.topics.items()
                if t.error is None
            }

        return self.policy.call(once)

    def topic_ids(self, names: Iterable[str]) -> dict[str, str]:
        """{topic: topic id} (DescribeTopics, KIP-516), in Kafka's base64 spelling as
        kafka-topics.sh --describe prints it."""
        from confluent_kafka import TopicCollection

        wanted = sorted(set(names))
        if not wanted:
            return {}
        futures = self.client.describe_topics(TopicCollection(wanted), request_timeout=self.timeout)
        return {
            name: str(self.await_result(fut, f"DescribeTopics {name!r}").topic_id)
            for name, fut in futures.items()
        }

    def topics(self) -> dict[str, int]:
        """{topic: partition count}, freshly from Metadata."""
        return {name: info.partitions for name, info in self.describe_topics().items()}

    def list_offsets(
        self, tps: Iterable[TopicPartition], which: str | int, *, read_committed: bool = True
    ) -> Offsets:
        """ListOffsets: ``earliest`` (log start), ``latest`` (the last stable offset under
        read_committed, the high watermark otherwise), or a timestamp in ms (the first
        offset at or after it; -1 when there is none) of each topic-partition."""
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KTP
        from confluent_kafka.admin import OffsetSpec

        wanted = sorted(set(tps))
        out: Offsets = {}
        if not wanted:
            return out
        if self._client is None:
            # A fresh librdkafka client can lose its first topic lookup while it swaps the
            # bootstrap connection for the broker's, and then waits 3 s to ask again.
            self.describe_topics()
        if isinstance(which, int):
            spec = OffsetSpec.for_timestamp(which)
        else:
            spec = OffsetSpec.earliest() if which == EARLIEST else OffsetSpec.latest()
        isolation = (
            IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        )

        def once() -> Offsets:
            missing = [tp for tp in wanted if tp not in out]
            futures = self.client.list_offsets(
                {KTP(t, p): spec for t, p in missing},
                isolation_level=isolation,
                request_timeout=self.timeout,
            )
            errors: list[ClientError] = []
            for ktp, fut in futures.items():
                try:
                    out[(ktp.topic, ktp.partition)] = fut.result(self.timeout).offset
                except KafkaException as exc:
                    errors.append(
                        from_kafka_error(exc, f"ListOffsets of {ktp.topic}-{ktp.partition}")
                    )
            if errors:
                first = next((e for e in errors if not e.retriable), errors[0])
                raise ClientError(
                    "; ".join(map(str, errors)),
                    first.error_code,
                    retriable=first.retriable,
                    local_code=first.local_code,
                )
            return out

        return self.policy.call(once)

    def offsets_for_times(
        self, times: Mapping[TopicPartition, int], *, read_committed: bool = True
    ) -> Offsets:
        """ListOffsets by timestamp, one timestamp (ms) per topic-partition: the first offset
        whose record has a timestamp at or after it, -1 when there is none."""
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KTP
        from confluent_kafka.admin import OffsetSpec

        if not times:
            return {}
        isolation = (
            IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        )

        def once() -> Offsets:
            futures = self.client.list_offsets(
                {KTP(t, p): OffsetSpec.for_timestamp(ts) for (t, p), ts in times.items()},
                isolation_level=isolation,
                request_timeout=self.timeout,
            )
            out: Offsets = {}
            for ktp, fut in futures.items():
                try:
                    out[(ktp.topic, ktp.partition)] = fut.result(self.timeout).offset
                except KafkaException as exc:
                    raise from_kafka_error(
                        exc, f"ListOffsets by timestamp of {ktp.topic}-{ktp.partition}"
                    ) from exc
            return out

        return self.policy.call(once)

    def broker_ids(self) -> list[int]:
        """The ids of the brokers in the cluster's Metadata, sorted."""
        from confluent_kafka import KafkaException

        try:
            return sorted(self.client.list_topics(timeout=self.timeout).brokers)
        except KafkaException as exc:
            raise from_kafka_error(exc, "Metadata") from exc

    # -- topics ------------------------------------------------------------------------------
    def create_topics(
        self,
        names: Iterable[str],
        partitions: int,
        replication_factor: int = 1,
        *,
        config: Mapping[str, str] | None = None,
        exist_ok: bool = True,
    ) -> list[str]:
        """CreateTopics; returns the names created (with ``exist_ok``, an existing topic is
        skipped, else its TOPIC_ALREADY_EXISTS raises)."""
        from confluent_kafka.admin import NewTopic

        new = [
            NewTopic(n, partitions, replication_factor, config=dict(config or {})) for n in names
        ]
        created = []
        for name, fut in self.client.create_topics(new, operation_timeout=self.timeout).items():
            try:
                self.await_result(fut, f"CreateTopics {name!r}")
                created.append(name)
            except ClientError as exc:
                if not (exist_ok and exc.error_code == ErrorCode.topic_already_exists):
                    raise
        return created

    def ensure_partitions(self, topic: str, partitions: int) -> None:
        """Create the topic, or grow it, so that it has at least ``partitions`` partitions."""
        from confluent_kafka.admin import NewPartitions

        have = self.topics().get(topic, 0)
        if have >= partitions:
            return
        if have == 0:
            self.create_topics([topic], partitions)
            return
        fut = self.client.create_partitions(
            [NewPartitions(topic, partitions)], operation_timeout=self.timeout
        )[topic]
        try:
            self.await_result(fut, f"CreatePartitions {topic!r}")
        except ClientError as exc:
            if exc.error_code != ErrorCode.invalid_partitions:  # grown concurrently
                raise

    def create_partitions(self, topic: str, total: int) -> None:
        """CreatePartitions: grow ``topic`` to ``total`` partitions (errors as they come)."""
        from confluent_kafka.admin import NewPartitions

        fut = self.client.create_partitions(
            [NewPartitions(topic, total)], operation_timeout=self.timeout
        )[topic]
        self.await_result(fut, f"CreatePartitions {topic!r}")

    def delete_records(self, before: Mapping[TopicPartition, int]) -> Offsets:
        """DeleteRecords: move each partition's log start to the given offset (-1: the high
        watermark); returns the new log start offsets."""
        from confluent_kafka import TopicPartition as KTP

        futures = self.client.delete_records(
            [KTP(t, p, o) for (t, p), o in sorted(before.items())],
            request_timeout=self.timeout,
            operation_timeout=self.timeout,
        )
        return {
            (ktp.topic, ktp.partition): self.await_result(
                fut, f"DeleteRecords {ktp.topic}-{ktp.partition}"
            ).low_watermark
            for ktp, fut in futures.items()
        }

    def describe_configs(self, resource_type: str, name: str) -> list[ConfigInfo]:
        """DescribeConfigs of a ``topic`` or ``broker``: every entry, sorted by name."""
        from confluent_kafka.admin import ConfigResource

        if name == "":  # the cluster-wide default broker configs: librdkafka refuses ""
            return self._default_configs(resource_type)
        res = ConfigResource(resource_type, name)
        entries = self.await_result(
            self.client.describe_configs([res], request_timeout=self.timeout)[res],
            f"DescribeConfigs {resource_type} {name!r}",
        )
        return sorted(
            (
                ConfigInfo(
                    e.name,
                    None if e.is_sensitive else e.value,
                    _source_name(e.source),
                    bool(e.is_default),
                    bool(e.is_read_only),
                    bool(e.is_sensitive),
                )
                for e in entries.values()
            ),
            key=lambda c: c.name,
        )

    def alter_configs(
        self,
        resource_type: str,
        name: str,
        set_: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
    ) -> None:
        """IncrementalAlterConfigs: set and delete (revert to default) entries."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in (set_ or {}).items()
        ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        if name == "":  # the cluster-wide default broker configs: librdkafka refuses ""
            ops = [(k, 0, v) for k, v in (set_ or {}).items()] + [(k, 1, None) for k in delete]
            self.policy.call(
                lambda: self._protocol_client().incremental_alter_configs(
                    _RESOURCE_TYPES[resource_type], "", ops
                )
            )
            return
        res = ConfigResource(resource_type, name, incremental_configs=entries)
        self.await_result(
            self.client.incremental_alter_configs([res], request_timeout=self.timeout)[res],
            f"IncrementalAlterConfigs {resource_type} {name!r}",
        )

    def _default_configs(self, resource_type: str) -> list[ConfigInfo]:
        entries = self.policy.call(
            lambda: self._protocol_client().describe_configs(_RESOURCE_TYPES[resource_type], "")
        )
        return sorted(
            (
                ConfigInfo(
                    e.name,
                    None if e.is_sensitive else e.value,
                    _source_name(int(e.config_source)),
                    int(e.config_source) == 5,  # DEFAULT_CONFIG
                    bool(e.read_only),
                    bool(e.is_sensitive),
                )
                for e in entries
            ),
            key=lambda c: c.name,
        )

    def delete_topic(self, name: str) -> None:
        self.await_result(
            self.client.delete_topics([name], operation_timeout=self.timeout)[name],
            f"DeleteTopics {name!r}",
        )

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource

        res = ConfigResource("topic", name)
        configs = self.await_result(
            self.client.describe_configs([res])[res], f"DescribeConfigs {name!r}"
        )
        return {k: v.value for k, v in configs.items() if not v.is_default}

    # -- ACLs -----------------------------------------------------------------------------------
    def authorizer_enabled(self) -> bool:
        """Whether the cluster has an authorizer (else it keeps no ACLs: Kafka's
        SECURITY_DISABLED, which librdkafka's DescribeAcls turns into an empty list)."""
        return bool(self.policy.call(lambda: self._protocol_client().authorizer_enabled()))

    # -- producers (KIP-618) -----------------------------------------------------------------
    def fence_producers(self, transactional_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """Fence out every producer of these transactional ids, as Kafka's
        ``Admin.fenceProducers``: per id, FindCoordinator(TRANSACTION) then InitProducerId
        with no producer id and epoch. The coordinator bumps the epoch (the current
        producer's next transactional call fails with PRODUCER_FENCED) and aborts its open
        transaction. Returns {id: (producer id, new epoch)}.

        The ids of one coordinator are fenced together (pipelined requests), not one
        after another. Every id is attempted, as Kafka's ``FenceProducersResult`` has one
        result per id:
        a fatal error for one id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ...) does not stop
        the others. NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE look the coordinator up
        again; COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS (the abort still
        completing) retry; all within the retry policy's deadline. If any id failed for
        good, :class:`FenceProducersError` (a ``ClientError``) carries every id's outcome
        and names each failed id."""
        pending = sorted(set(transactional_ids))
        done: dict[str, tuple[int, int]] = {}
        failed: dict[str, ClientError] = {}
        # The coordinator appends the bumped epoch within this timeout (Kafka: the
        # admin client's request timeout).
        timeout = datetime.timedelta(seconds=self.timeout)

        def once() -> dict[str, tuple[int, int]]:
            protocol = self._protocol_client()
            retry: ClientError | None = None
            todo = [t for t in pending if t not in done and t not in failed]
            outcomes: dict[str, tuple[int, int] | ClientError] = {}
            by_node: dict[int, list[str]] = {}
            for tid, found in protocol.find_coordinators(todo).items():
                if isinstance(found, ErrorCode):
                    outcomes[tid] = ClientError(
                        f"fencing {tid!r}: no coordinator: {found.name.upper()}", found
                    )
                else:
                    by_node.setdefault(found, []).append(tid)
            for node, tids in by_node.items():
                outcomes.update(protocol.init_producer_ids_on(node, tids, timeout))
            for tid, outcome in outcomes.items():
                if not isinstance(outcome, ClientError):
                    done[tid] = outcome
                elif not outcome.retriable:
                    failed[tid] = outcome
                else:
                    retry = outcome
            if retry is not None:
                raise retry
            return done

        def before_retry(exc: BaseException) -> None:
            if self._protocol is not None:
                if isinstance(exc, OSError):
                    self._protocol.close()
                self._protocol.forget_metadata()

        if not pending:
            return {}
        self.policy.call(once, on_retry=before_retry)
        if failed:
            raise FenceProducersError({tid: done[tid] for tid in pending if tid in done}, failed)
        return {tid: done[tid] for tid in pending}

    def _protocol_client(self) -> ProtocolClient:
        if self._protocol is None:
            from oncelog.client.protocol import ProtocolClient

            self._protocol = ProtocolClient(self.config, timeout=self.timeout)
        return self._protocol
