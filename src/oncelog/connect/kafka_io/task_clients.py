"""The clients of tasks and connectors: source producers (idempotent and
transactional), sink consumers, the dead letter producer, producer fencing, sink
group offsets (KIP-875) and ``TaskClients``, the worker's ``ClientFactory``."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.client.admin import Admin
from oncelog.client.consumer import KafkaConsumer
from oncelog.client.errors import AuthenticationError, ClientError
from oncelog.client.groups import GroupAdmin, OffsetCommitError
from oncelog.client.kafka_producer import Delivered, KafkaProducer
from oncelog.client.reach import check_handshake, check_reachable
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.records import RecordMetadata
from oncelog.connect.api.records import TopicPartition as ConnectTopicPartition
from oncelog.connect.kafka_io.internal_topics import (
    SeparateOffsetsTopic,
    TopicWriter,
    read_offsets_topic,
)
from oncelog.connect.kafka_io.settings import (
    client_config,
    librdkafka,
    raise_transaction_error,
)
from oncelog.connect.runtime import client_configs
from oncelog.connect.runtime.abstract_source_task import DeliveryCallback
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.runtime.worker_sink_task import ConsumedRecord
from oncelog.connect.storage.internal_log import LogRecord

log = logging.getLogger(__name__)


def check_credentials(config: Mapping[str, Any]) -> None:
    """Fail a task whose client cannot authenticate, as Kafka does (its producer or consumer
    raises SaslAuthenticationException / SslAuthenticationException, and the task fails):
    librdkafka would retry the refused handshake forever while the task shows RUNNING. Only a
    refused TLS/SASL handshake fails the task; an unreachable or restarting broker is left to
    the client's retries."""
    cfg = client_config(config)
    if not (cfg.security.tls or cfg.security.sasl):
        return
    try:
        check_handshake(cfg, check_reachable(cfg, 2.0))
    except AuthenticationError as exc:
        raise ConnectException(f"Cannot connect to the Kafka cluster: {exc}") from None
    except ClientError as exc:
        log.debug("credentials not checked: %s", exc)


class ProducerSender:
    """A source task's ``RecordSender``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        check_credentials(config)
        self.producer = KafkaProducer(librdkafka(config))

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
        def callback(err: ClientError | None, sent: Delivered | None) -> None:
            if sent is None:
                on_delivery(err, None)
            else:
                on_delivery(
                    None, RecordMetadata(sent.topic, sent.partition, sent.offset, sent.timestamp)
                )

        self.producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp=timestamp,
            headers=headers,
            on_delivery=callback,
        )

    def poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)

    def flush(self, timeout_s: float) -> int:
        return self.producer.flush(timeout_s)


class TransactionalProducerSender(ProducerSender):
    """An exactly-once source task's ``TransactionalSender``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self._write_errors: list[ClientError] = []

    def init_transactions(self, timeout_s: float) -> None:
        try:
            self.producer.init_transactions(timeout_s)
        except ClientError as exc:
            raise_transaction_error("Initializing the producer's transactions", exc)

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
        except ClientError as exc:
            # A fatal producer state (fenced, or its transaction timed out) refuses sends.
            raise_transaction_error(f"Sending a record to {topic}", exc)

    def flush(self, timeout_s: float) -> int:
        try:
            return self.producer.flush(timeout_s)
        except ClientError as exc:
            raise_transaction_error("Flushing the transaction's records", exc)

    def begin_transaction(self) -> None:
        try:
            self.producer.begin_transaction()
        except ClientError as exc:
            raise_transaction_error("Beginning a transaction", exc)

    def write(self, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            try:
                self.producer.produce(
                    topic,
                    key=key,
                    value=value,
                    on_delivery=lambda e, _: self._write_errors.append(e) if e else None,
                )
            except ClientError as exc:
                raise_transaction_error(f"Writing offsets to {topic}", exc)

    def commit_transaction(self, timeout_s: float) -> None:
        try:
            self.producer.commit_transaction(timeout_s)
        except ClientError as exc:
            raise_transaction_error("Committing the transaction", exc)
        if self._write_errors:
            errors, self._write_errors = self._write_errors, []
            raise ConnectException(f"Writing offsets failed: {_listed(errors)}")

    def abort_transaction(self, timeout_s: float) -> None:
        self._write_errors = []
        try:
            self.producer.abort_transaction(timeout_s)
        except ClientError as exc:
            raise_transaction_error("Aborting the transaction", exc)

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


class ProducerFencer:
    """Fences out producers by transactional id with a connector's admin settings."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = client_config(config)

    def fence(self, transactional_ids: Sequence[str]) -> None:
        with Admin(self.config) as admin:
            try:
                admin.fence_producers(transactional_ids)
            except ClientError as exc:
                failed = getattr(exc, "failed", None) or {t: exc for t in transactional_ids}
                denied = sorted(
                    t
                    for t, e in failed.items()
                    if e.error_code is ErrorCode.transactional_id_authorization_failed
                )
                remedy = ""
                if denied:
                    # KIP-618: the failure names how to fix it.
                    remedy = (
                        ". The connector's admin principal (its admin.override.* settings, "
                        "else the worker's admin.* settings) may not fence these producers: "
                        f"grant it Write and Describe on the TransactionalId resources {denied}"
                        " (or on the prefix they share)"
                    )
                raise ConnectException(
                    f"Failed to fence out producers {sorted(transactional_ids)}: {exc}{remedy}"
                ) from None


class ConsumerSinkSource:
    """A sink task's ``SinkRecordSource``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        check_credentials(config)
        self.consumer = KafkaConsumer(librdkafka(config))

    def subscribe(
        self,
        topics: list[str],
        pattern: str | None,
        on_assign: Callable[[list[ConnectTopicPartition]], None],
        on_revoke: Callable[[list[ConnectTopicPartition]], None],
    ) -> None:
        def convert(parts: list[tuple[str, int]]) -> list[ConnectTopicPartition]:
            return [ConnectTopicPartition(t, p) for t, p in parts]

        self.consumer.subscribe(
            topics or [f"^{pattern}"],
            on_assign=lambda parts: on_assign(convert(parts)),
            on_revoke=lambda parts: on_revoke(convert(parts)),
        )

    def poll(self, timeout_s: float, max_records: int) -> list[ConsumedRecord]:
        # Errors are the consumer's to retry (a restarting broker); records are what count.
        return [
            ConsumedRecord(
                r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, headers=r.headers
            )
            for r in self.consumer.consume(max_records, timeout_s).records
        ]

    def commit(self, offsets: dict[ConnectTopicPartition, int]) -> None:
        self.consumer.commit({(tp.topic, tp.partition): o for tp, o in offsets.items()})

    def seek(self, partition: ConnectTopicPartition, offset: int) -> None:
        self.consumer.seek(partition.topic, partition.partition, offset)

    def pause(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.pause([(p.topic, p.partition) for p in partitions])

    def resume(self, partitions: list[ConnectTopicPartition]) -> None:
        if partitions:
            self.consumer.resume([(p.topic, p.partition) for p in partitions])

    def close(self) -> None:
        self.consumer.close()


class DeadLetterProducer:
    """A sink connector's dead letter queue (``errors.deadletterqueue.topic.name``)."""

    def __init__(self, config: Mapping[str, Any], topic: str) -> None:
        self.producer = KafkaProducer(librdkafka(config))
        self.topic = topic

    def send(self, record: ConsumedRecord, error: Exception) -> None:
        self.producer.produce(
            self.topic, key=record.key, value=record.value, headers=record.headers
        )
        self.producer.flush(10)


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

    def read_global_offsets(
        self,
        connector: str,
        connector_config: Mapping[str, str],
        apply: Callable[[LogRecord], None],
        timeout_s: float,
    ) -> None:
        """Read the worker's global offsets topic to its end with the connector's
        consumer: its principal needs READ on the topic (KIP-618's ACL table)."""
        config = client_configs.offsets_consumer_config(self.worker, connector, connector_config)
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


class SinkOffsetsAdmin:
    """A sink connector's offsets: its consumer group ``connect-<name>`` (KIP-875)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.groups = GroupAdmin(Admin(client_config(config), timeout=30))

    def offsets(self, group: str) -> dict[ConnectTopicPartition, int]:
        committed = self.groups.committed(group)
        return {ConnectTopicPartition(t, p): o for (t, p), o in committed.items()}

    def alter(self, group: str, offsets: Mapping[ConnectTopicPartition, int]) -> None:
        wanted = {(tp.topic, tp.partition): o for tp, o in offsets.items()}
        try:
            self.groups.alter_offsets(group, wanted)
        except OffsetCommitError as exc:
            failed = exc.failed
            if any(e.error_code == ErrorCode.unknown_member_id for e in failed.values()):
                # The group still has members: the sink tasks have not stopped yet.
                raise ConnectException(
                    f"Failed to alter consumer group offsets for group {group} either because its "
                    "tasks haven't stopped completely yet or the connector was resumed before the "
                    "request to alter its offsets could be successfully completed. If the connector "
                    "is in a stopped state, this operation can be safely retried."
                ) from None
            raise ConnectException(
                f"Failed to alter consumer group offsets for group {group}: "
                + ", ".join(f"{t}-{p}: {e.library_text}" for (t, p), e in failed.items())
            ) from None

    def delete_group(self, group: str) -> None:
        try:
            self.groups.delete_groups([group])
        except ClientError as exc:
            if exc.error_code != ErrorCode.group_id_not_found:
                raise


def _listed(errors: Sequence[ClientError]) -> str:
    """Errors as these messages always listed them (confluent-kafka's spelling)."""
    return "[" + ", ".join(e.library_text for e in errors) + "]"
