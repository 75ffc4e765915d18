"""The worker's Kafka clients: the ONE module of ``connect`` that uses a Kafka client
library for records (group membership speaks the protocol itself in ``membership``,
over the client layer's connections). Every configuration goes through the client
layer (``oncelog.client``: ``ClientConfig`` for bootstrap servers, TLS and SASL;
``Admin`` for the admin client); producers and consumers are confluent-kafka's, as
the client layer prescribes.

- :class:`TaskClients` implements the worker's ``ClientFactory``: each source task's
  idempotent producer, the offset writer, each sink task's consumer in group
  ``connect-<name>`` and the dead letter producer, with the settings that
  ``client_configs`` assembles (worker prefixes and connector overrides).
- :class:`TopicLogConsumer` reads an internal topic (``internal_log.LogConsumer``).
- :class:`TopicWriter` writes config and status records.
- :class:`TransactionalTopicWriter` is the leader's config-topic writer when exactly-once
  source support is ``preparing`` or ``enabled`` (KIP-618): one transaction per write,
  transactional id ``connect-cluster-<group>``, so a zombie leader's writes fail.
- :class:`ProducerFencer` fences task producers (``Admin.fence_producers``) with the
  connector's admin settings.
- :class:`InternalTopicAdmin` creates the internal topics (compacted, with Kafka's
  partition counts) and checks their cleanup policy.
- :class:`SinkOffsetsAdmin` reads and changes a sink connector's consumer group
  offsets (KIP-875).

Settings keep Kafka's (Java) names where librdkafka knows them under the same name.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.java_config import librdkafka_settings
from oncelog.client.security import ClientConfigError
from oncelog.connect import client_configs
from oncelog.connect.errors import ConnectException
from oncelog.connect.internal_log import InternalTopicReader, LogRecord
from oncelog.connect.records import RecordMetadata
from oncelog.connect.records import TopicPartition as ConnectTopicPartition
from oncelog.connect.worker_config import WorkerConfig
from oncelog.connect.worker_sink_task import ConsumedRecord
from oncelog.connect.worker_source_task import DeliveryCallback

log = logging.getLogger(__name__)

# Java-client settings librdkafka does not know; the framework sets them for Java's
# producer and consumer, librdkafka's defaults mean the same.
_JAVA_ONLY = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)


def librdkafka_conf(config: Mapping[str, Any]) -> dict[str, str]:
    """A client config with Kafka's security names (``sasl.jaas.config``, PEM
    ``ssl.truststore.location``, ...) translated for librdkafka; a Java-only setting
    (a JKS store, say) raises ConnectException naming the key."""
    try:
        return librdkafka_settings({k: str(v) for k, v in config.items()})
    except ClientConfigError as exc:
        raise ConnectException(f"Invalid client settings: {exc}") from None


def client_config(config: Mapping[str, Any]) -> ClientConfig:
    """The client layer's connection settings (bootstrap, TLS, SASL) of a client config;
    raises ConnectException for invalid security settings."""
    conf = librdkafka_conf(config)
    try:
        return ClientConfig.of(str(conf["bootstrap.servers"]), conf)
    except (ClientError, ValueError) as exc:
        raise ConnectException(f"Invalid client settings: {exc}") from None


def check_worker_client_settings(worker: WorkerConfig) -> None:
    """Fail at start, naming the key, when the worker's shared or ``producer.`` /
    ``consumer.`` / ``admin.`` client settings cannot be honoured: a worker never
    connects with less security than it was configured with."""
    shared = worker.shared_client_config()
    for prefix in ("", "producer.", "consumer.", "admin."):
        own = {k: str(v) for k, v in worker.originals_with_prefix(prefix).items()} if prefix else {}
        own.pop("listeners", None)
        try:
            conf = librdkafka_settings({**shared, **own})
            ClientConfig.of(str(conf["bootstrap.servers"]), conf)
        except (ClientError, ValueError) as exc:
            where = f" (with the worker's {prefix}* settings)" if prefix else ""
            raise ConnectException(f"Invalid worker client settings{where}: {exc}") from None


def _librdkafka(config: Mapping[str, Any]) -> dict[str, Any]:
    """A confluent-kafka configuration built by the client layer: its connection
    settings, then this client's own."""
    conf = librdkafka_conf(config)
    own = {k: v for k, v in conf.items() if k not in _JAVA_ONLY and k != "bootstrap.servers"}
    return client_config(conf).librdkafka(**own)


class ProducerSender:
    """A source task's ``RecordSender``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.producer = Producer(_librdkafka(config))

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None,
        timestamp: int | None,
        headers: Sequence[tuple[str, bytes | None]],
        on_delivery: DeliveryCallback,
    ) -> None:
        def callback(err: Any, msg: Any) -> None:
            if err is not None:
                on_delivery(KafkaException(err), None)
            else:
                on_delivery(
                    None,
                    RecordMetadata(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1]),
                )

        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                self.producer.produce(
                    topic,
                    value=value,
                    key=key,
                    headers=list(headers) or None,
                    on_delivery=callback,
                    **kwargs,
                )
                return
            except BufferError:
                self.producer.poll(0.1)

    def poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)

    def flush(self, timeout_s: float) -> int:
        return int(self.producer.flush(timeout_s))


_FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


def _transaction_error(what: str, exc: KafkaException) -> ConnectException:
    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, KafkaError) else None
    if code in _FENCED_CODES:
        return ConnectException(
            f"{what} failed: the producer was fenced out (a newer instance of this task, or "
            f"a round of zombie fencing, took over its transactional id): {error}"
        )
    return ConnectException(f"{what} failed: {error}")


class TransactionalProducerSender(ProducerSender):
    """An exactly-once source task's ``TransactionalSender``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self._write_errors: list[Any] = []

    def init_transactions(self, timeout_s: float) -> None:
        try:
            self.producer.init_transactions(timeout_s)
        except KafkaException as exc:
            raise _transaction_error("Initializing the producer's transactions", exc) from None

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None,
        timestamp: int | None,
        headers: Sequence[tuple[str, bytes | None]],
        on_delivery: DeliveryCallback,
    ) -> None:
        try:
            super().send(
                topic, key, value, partition=partition, timestamp=timestamp, headers=headers,
                on_delivery=on_delivery,
            )  # fmt: skip
        except KafkaException as exc:
            # A fatal producer state (fenced, or its transaction timed out) refuses sends.
            raise _transaction_error(f"Sending a record to {topic}", exc) from None

    def begin_transaction(self) -> None:
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            raise _transaction_error("Beginning a transaction", exc) from None

    def write(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            while True:
                try:
                    self.producer.produce(
                        topic,
                        key=key,
                        value=value,
                        on_delivery=lambda e, m: self._write_errors.append(e) if e else None,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    raise _transaction_error(f"Writing offsets to {topic}", exc) from None

    def commit_transaction(self, timeout_s: float) -> None:
        try:
            self.producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            raise _transaction_error("Committing the transaction", exc) from None
        if self._write_errors:
            errors, self._write_errors = self._write_errors, []
            raise ConnectException(f"Writing offsets failed: {errors}")

    def abort_transaction(self, timeout_s: float) -> None:
        self._write_errors = []
        try:
            self.producer.abort_transaction(timeout_s)
        except KafkaException as exc:
            raise _transaction_error("Aborting the transaction", exc) from None

    def close(self) -> None:
        self.producer.flush(5)


class GlobalOffsetCopier:
    """Copies a connector's committed offsets to the worker's global offsets topic on
    its own thread, with the worker's principal and a non-transactional producer,
    retrying until it succeeds or is closed; it never fails or blocks the task."""

    def __init__(self, writer: TopicWriter, retry_backoff_s: float = 1.0) -> None:
        self.writer = writer
        self.retry_backoff_s = retry_backoff_s
        self._queue: queue.Queue[list[tuple[bytes, bytes | None]] | None] = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offsets-copier", daemon=True)
        self._thread.start()

    def copy(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self._queue.put(list(records))

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            while True:
                try:
                    self.writer.write(list(batch), 30)
                    break
                except ConnectException as exc:
                    if self._closed.is_set():
                        log.warning("Giving up copying offsets to the global topic: %s", exc)
                        break
                    log.warning("Copying offsets to the global topic failed, retrying: %s", exc)
                    time.sleep(self.retry_backoff_s)

    def close(self, timeout_s: float) -> None:
        """Finish the queued copies within ``timeout_s`` if possible."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        self._closed.set()


class TopicWriter:
    """Writes keyed records to one topic. Keys are placed with murmur2, so each lands
    on the partition Java's producer would choose (the offsets topic relies on it)."""

    def __init__(self, config: Mapping[str, Any], topic: str) -> None:
        self.producer = Producer(
            {
                **_librdkafka(config),
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        self.topic = topic

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        """Write ``records`` in order and wait until all are acknowledged."""
        errors: list[Any] = []
        for key, value in records:
            self._produce(key, value, lambda e, m: errors.append(e) if e else None)
        remaining = self.producer.flush(timeout_s)
        if remaining or errors:
            raise ConnectException(
                f"Write to {self.topic} failed: {remaining} outstanding, errors {errors}"
            )

    def send(self, key: bytes | str, value: bytes | None) -> None:
        """Write without waiting (statuses); ``poll`` serves the acknowledgements."""
        self._produce(key, value, None)
        self.producer.poll(0)

    def _produce(self, key: bytes | str, value: bytes | None, callback: Any) -> None:
        while True:
            try:
                self.producer.produce(self.topic, key=key, value=value, on_delivery=callback)
                return
            except BufferError:
                self.producer.poll(0.1)

    def flush(self, timeout_s: float) -> int:
        return int(self.producer.flush(timeout_s))


class ProducerFencedError(ConnectException):
    """Another producer with the same transactional id took over: this one is a zombie."""


class TransactionalTopicWriter:
    """Writes keyed records to one topic, each write in its own transaction.

    ``init`` (InitProducerId) fences out every earlier producer of the transactional id
    and aborts what it left open; from then on a write by an earlier instance fails. A
    failed write leaves this writer unusable (librdkafka's errors after a fencing are
    fatal): close it and create a new one."""

    def __init__(self, config: Mapping[str, Any], topic: str, transactional_id: str) -> None:
        self.producer = Producer(
            {
                **_librdkafka(config),
                "partitioner": "murmur2_random",
                "transactional.id": transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
            }
        )
        self.topic = topic
        self.transactional_id = transactional_id

    def init(self, timeout_s: float) -> None:
        try:
            self.producer.init_transactions(timeout_s)
        except KafkaException as exc:
            raise self._error("Initializing", exc) from None

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        """Write ``records`` in one transaction and wait for its commit."""
        errors: list[Any] = []
        try:
            self.producer.begin_transaction()
            for key, value in records:
                while True:
                    try:
                        self.producer.produce(
                            self.topic,
                            key=key,
                            value=value,
                            on_delivery=lambda e, m: errors.append(e) if e else None,
                        )
                        break
                    except BufferError:
                        self.producer.poll(0.1)
            self.producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            raise self._error("Transactional write to", exc) from None
        if errors:
            raise ConnectException(f"Transactional write to {self.topic} failed: {errors}")

    def _error(self, what: str, exc: KafkaException) -> ConnectException:
        error = exc.args[0]
        fenced = error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
        kind = ProducerFencedError if fenced else ConnectException
        return kind(
            f"{what} {self.topic} as {self.transactional_id!r} failed: {error.name()} "
            f"({error.str()})"
        )

    def close(self) -> None:
        # Nothing is left in flight: every write waited for its commit (or failed).
        self.producer.flush(0)


class ProducerFencer:
    """Fences out producers by transactional id with a connector's admin settings."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = client_config(config)

    def fence(self, transactional_ids: Sequence[str]) -> None:
        with Admin(self.config) as admin:
            try:
                admin.fence_producers(transactional_ids)
            except ClientError as exc:
                raise ConnectException(
                    f"Failed to fence out producers {sorted(transactional_ids)}: {exc}"
                ) from None


class ConsumerSinkSource:
    """A sink task's ``SinkRecordSource``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.consumer = Consumer(_librdkafka(config))

    def subscribe(
        self,
        topics: list[str],
        pattern: str | None,
        on_assign: Callable[[list[ConnectTopicPartition]], None],
        on_revoke: Callable[[list[ConnectTopicPartition]], None],
    ) -> None:
        def convert(parts: list[Any]) -> list[ConnectTopicPartition]:
            return [ConnectTopicPartition(p.topic, p.partition) for p in parts]

        self.consumer.subscribe(
            topics or [f"^{pattern}"],
            on_assign=lambda c, parts: on_assign(convert(parts)),
            on_revoke=lambda c, parts: on_revoke(convert(parts)),
        )

    def poll(self, timeout_s: float, max_records: int) -> list[ConsumedRecord]:
        out = []
        messages: list[Any] = self.consumer.consume(max_records, timeout_s)
        for msg in messages:
            if msg.error() is not None:
                continue
            out.append(
                ConsumedRecord(
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.timestamp()[1],
                    headers=tuple(msg.headers() or ()),
                )
            )
        return out

    def commit(self, offsets: dict[ConnectTopicPartition, int]) -> None:
        self.consumer.commit(
            offsets=[TopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )

    def seek(self, partition: ConnectTopicPartition, offset: int) -> None:
        self.consumer.seek(TopicPartition(partition.topic, partition.partition, offset))

    def pause(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.pause([TopicPartition(p.topic, p.partition) for p in partitions])

    def resume(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.resume([TopicPartition(p.topic, p.partition) for p in partitions])

    def close(self) -> None:
        self.consumer.close()


class DeadLetterProducer:
    """A sink connector's dead letter queue (``errors.deadletterqueue.topic.name``)."""

    def __init__(self, config: Mapping[str, Any], topic: str) -> None:
        self.producer = Producer(_librdkafka(config))
        self.topic = topic

    def send(self, record: ConsumedRecord, error: Exception) -> None:
        self.producer.produce(
            self.topic, key=record.key, value=record.value, headers=list(record.headers) or None
        )
        self.producer.flush(10)


class TopicLogConsumer:
    """``internal_log.LogConsumer``: assigned partitions, no group offsets; aborted writes of a
    fenced leader are never applied.

    It reads read_committed. Its end offsets are the last stable offsets, or with
    ``high_watermark_ends`` the high watermarks (KIP-618's read "to the end": end offsets
    listed read_uncommitted, then consumed read_committed until reached, so a transaction
    still open at the start of the read is waited for rather than skipped)."""

    def __init__(self, config: Mapping[str, Any], *, high_watermark_ends: bool = False) -> None:
        self._lister: Consumer | None = None
        if high_watermark_ends:
            self._lister = Consumer(
                {
                    **_librdkafka(config),
                    "group.id": f"connect-log-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",
                }
            )
        self.consumer = Consumer(
            {
                **_librdkafka(config),
                "group.id": f"connect-log-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                # Offsets written by exactly-once tasks, and config records of a
                # transactional leader, count only once their transaction commits.
                "isolation.level": "read_committed",
                # Listing end offsets waits behind a long-polling fetch on the same connection.
                "fetch.wait.max.ms": 100,
            }
        )

    def partitions(self, topic: str) -> list[int]:
        metadata = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        return sorted(metadata.partitions)

    def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int]:
        # One ListOffsets request for all partitions (timestamp -1: the end).
        lister = self._lister or self.consumer
        found = lister.offsets_for_times(
            [TopicPartition(topic, p, -1) for p in partitions], timeout=10
        )
        for tp in found:
            if tp.error is not None:
                raise ConnectException(f"Listing end offsets of {topic} failed: {tp.error}")
        return {tp.partition: tp.offset for tp in found}

    def assign(self, topic: str, positions: dict[int, int]) -> None:
        self.consumer.assign([TopicPartition(topic, p, o) for p, o in positions.items()])

    def poll(self, timeout_s: float) -> list[LogRecord]:
        messages: list[Any] = self.consumer.consume(500, timeout_s)
        return [
            LogRecord(m.partition(), m.offset(), m.key(), m.value())
            for m in messages
            if m.error() is None
        ]

    def positions(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return {
            tp.partition: tp.offset
            for tp in self.consumer.position([TopicPartition(topic, p) for p in partitions])
        }

    def close(self) -> None:
        self.consumer.close()
        if self._lister is not None:
            self._lister.close()


class TaskClients:
    """The worker's ``ClientFactory``."""

    def __init__(self, worker: WorkerConfig, offsets_topic: str) -> None:
        self.worker = worker
        self.offsets_topic = offsets_topic

    def record_sender(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> ProducerSender:
        return ProducerSender(
            client_configs.source_producer_config(self.worker, connector, task, connector_config)
        )

    def offset_writer(self, connector: str) -> TopicWriter:
        return TopicWriter(self.worker.shared_client_config(), self.offsets_topic)

    def separate_offset_writer(
        self, connector: str, topic: str, connector_config: Mapping[str, str]
    ) -> TopicWriter:
        """A writer to a connector's separate offsets topic, on the cluster its producer
        targets, with its producer's settings."""
        config = client_configs.source_producer_config(self.worker, connector, -1, connector_config)
        return TopicWriter(config, topic)

    def transactional_sender(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> TransactionalProducerSender:
        return TransactionalProducerSender(
            client_configs.exactly_once_producer_config(
                self.worker, connector, task, connector_config
            )
        )

    def global_offset_copier(self) -> GlobalOffsetCopier:
        return GlobalOffsetCopier(
            TopicWriter(self.worker.shared_client_config(), self.offsets_topic)
        )

    def read_global_offsets(self, apply: Callable[[LogRecord], None], timeout_s: float) -> None:
        """Read the worker's global offsets topic to its end (KIP-618 semantics)."""
        config = {**self.worker.shared_client_config(), "isolation.level": "read_committed"}
        read_offsets_topic(config, self.offsets_topic, apply, timeout_s)

    def separate_offsets(
        self, connector: str, topic: str, connector_config: Mapping[str, str]
    ) -> SeparateOffsetsTopic:
        return SeparateOffsetsTopic(self.worker, connector, topic, connector_config)

    def sink_source(
        self, connector: str, task: int, connector_config: Mapping[str, str]
    ) -> ConsumerSinkSource:
        return ConsumerSinkSource(
            client_configs.sink_consumer_config(self.worker, connector, task, connector_config)
        )

    def dead_letter_sender(self, connector: str, topic: str) -> DeadLetterProducer:
        return DeadLetterProducer(
            client_configs.source_producer_config(self.worker, connector, -1, {}), topic
        )


COMPACT = "compact"
_STORAGE_KEYS = {
    "config": "config.storage.topic",
    "offsets": "offset.storage.topic",
    "status": "status.storage.topic",
}


class InternalTopicAdmin:
    """Creates the internal topics at start and checks they are compacted."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.layer = Admin(client_config(config))
        self.admin = self.layer.client

    def ensure(self, topics: Mapping[str, tuple[str, int, int]], timeout_s: float = 30) -> None:
        """Create each (topic, partitions, replication factor) that is missing, with
        ``cleanup.policy=compact``; fail on an existing one that is not compacted only."""
        existing = set(self.admin.list_topics(timeout=timeout_s).topics)
        for topic, partitions, replication in topics.values():
            if topic in existing:
                continue
            try:
                self.layer.create_topics(
                    [topic], partitions, replication, config={"cleanup.policy": COMPACT}
                )
            except ClientError as exc:
                raise ConnectException(f"Unable to create internal topic {topic}: {exc}") from None
        for purpose, (topic, _, _) in topics.items():
            policy = self.cleanup_policy(topic, timeout_s)
            if {p.strip() for p in policy.split(",")} != {COMPACT}:
                key = _STORAGE_KEYS.get(purpose, f"{purpose}.storage.topic")
                raise ConnectException(
                    f"Topic '{topic}' supplied via the '{key}' property is required to have "
                    f"'cleanup.policy=compact' to guarantee consistency and durability of connector "
                    f"{purpose}, but found the topic currently has 'cleanup.policy={policy}'. Continuing "
                    f"would likely result in eventually losing connector {purpose} and problems "
                    f"restarting this Connect cluster in the future. Change the '{key}' property in the "
                    "Connect worker configurations to use a topic with 'cleanup.policy=compact'."
                )

    def cleanup_policy(self, topic: str, timeout_s: float = 30) -> str:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entries = self.admin.describe_configs([resource], request_timeout=timeout_s)[
            resource
        ].result(timeout_s)
        entry = entries.get("cleanup.policy")
        return "delete" if entry is None or entry.value is None else str(entry.value)


class SeparateOffsetsTopic:
    """A connector's own offsets topic: created on demand (compacted, with the worker's
    offsets-topic partitions and replication), read read_committed to its end."""

    def __init__(
        self,
        worker: WorkerConfig,
        connector: str,
        topic: str,
        connector_config: Mapping[str, str],
    ) -> None:
        self.worker = worker
        self.connector = connector
        self.topic = topic
        self.connector_config = dict(connector_config)

    def ensure(self) -> None:
        admin = client_configs.offsets_admin_config(
            self.worker, self.connector, self.connector_config
        )
        _, partitions, replication = self.worker.internal_topics()["offsets"]
        InternalTopicAdmin(admin).ensure({"offsets": (self.topic, partitions, replication)})

    def read(self, apply: Callable[[LogRecord], None], timeout_s: float) -> None:
        """Feed every record up to the current end to ``apply`` (end offsets listed first,
        then consumed read_committed until reached)."""
        read_offsets_topic(
            client_configs.offsets_consumer_config(
                self.worker, self.connector, self.connector_config
            ),
            self.topic,
            apply,
            timeout_s,
        )


def read_offsets_topic(
    config: Mapping[str, Any], topic: str, apply: Callable[[LogRecord], None], timeout_s: float
) -> None:
    """Read an offsets topic from its start to the high watermarks listed now, read_committed."""
    consumer = TopicLogConsumer(config, high_watermark_ends=True)
    try:
        reader = InternalTopicReader(consumer, topic, apply)
        reader.start()
        reader.read_to_end(timeout_s)
    finally:
        consumer.close()


class SinkOffsetsAdmin:
    """A sink connector's offsets: its consumer group ``connect-<name>`` (KIP-875)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.admin = Admin(client_config(config)).client

    def offsets(self, group: str, timeout_s: float = 30) -> dict[ConnectTopicPartition, int]:
        request = [ConsumerGroupTopicPartitions(group)]
        result = self.admin.list_consumer_group_offsets(request, request_timeout=timeout_s)[
            group
        ].result(timeout_s)
        return {
            ConnectTopicPartition(tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions
            if tp.offset >= 0
        }

    def alter(
        self, group: str, offsets: Mapping[ConnectTopicPartition, int], timeout_s: float = 30
    ) -> None:
        parts = [TopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()]
        result = self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, parts)], request_timeout=timeout_s
        )[group].result(timeout_s)
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            if any(tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID for tp in failed):
                # The group still has members: the sink tasks have not stopped yet.
                raise ConnectException(
                    f"Failed to alter consumer group offsets for group {group} either because its "
                    "tasks haven't stopped completely yet or the connector was resumed before the "
                    "request to alter its offsets could be successfully completed. If the connector "
                    "is in a stopped state, this operation can be safely retried."
                )
            raise ConnectException(
                f"Failed to alter consumer group offsets for group {group}: "
                + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )

    def delete_group(self, group: str, timeout_s: float = 30) -> None:
        try:
            self.admin.delete_consumer_groups([group], request_timeout=timeout_s)[group].result(
                timeout_s
            )
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise
