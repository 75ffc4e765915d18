"""Clients of the worker's internal topics: readers and (transactional) writers of the
config, status and offsets topics, their creation and checks."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.client.admin import Admin
from oncelog.client.consumer import KafkaConsumer
from oncelog.client.errors import LOCAL_FENCED, ClientError
from oncelog.client.kafka_producer import KafkaProducer
from oncelog.connect.api.errors import ConnectException, ProducerFencedError, RetriableException
from oncelog.connect.kafka_io.settings import (
    client_config,
    librdkafka,
)
from oncelog.connect.runtime import client_configs
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.internal_log import InternalTopicReader, LogRecord

log = logging.getLogger(__name__)


def _listed(errors: Sequence[ClientError]) -> str:
    """Errors as these messages always listed them (confluent-kafka's spelling)."""
    return "[" + ", ".join(e.library_text for e in errors) + "]"


class TopicWriter:
    """Writes keyed records to one topic. Keys are placed with murmur2, so each lands
    on the partition Java's producer would choose (the offsets topic relies on it)."""

    def __init__(self, config: Mapping[str, Any], topic: str) -> None:
        self.producer = KafkaProducer(
            {
                **librdkafka(config),
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        self.topic = topic

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        """Write ``records`` in order and wait until all are acknowledged."""
        errors: list[ClientError] = []
        for key, value in records:
            self.producer.produce(
                self.topic,
                key=key,
                value=value,
                on_delivery=lambda e, _: errors.append(e) if e else None,
            )
        remaining = self.producer.flush(timeout_s)
        if remaining or errors:
            message = (
                f"Write to {self.topic} failed: {remaining} outstanding, errors {_listed(errors)}"
            )
            if all(e.retriable for e in errors):
                # Unacknowledged in time (a broker restarting): the caller may write again.
                raise RetriableException(message)
            raise ConnectException(message)

    def send(self, key: bytes | str, value: bytes | None) -> None:
        """Write without waiting (statuses); ``poll`` serves the acknowledgements."""
        self.producer.produce(self.topic, key=key, value=value)
        self.producer.poll(0)

    def flush(self, timeout_s: float) -> int:
        return self.producer.flush(timeout_s)


class TransactionalTopicWriter:
    """Writes keyed records to one topic, each write in its own transaction.

    ``init`` (InitProducerId) fences out every earlier producer of the transactional id
    and aborts what it left open; from then on a write by an earlier instance fails. A
    failed write leaves this writer unusable (librdkafka's errors after a fencing are
    fatal): close it and create a new one."""

    def __init__(self, config: Mapping[str, Any], topic: str, transactional_id: str) -> None:
        self.producer = KafkaProducer(
            {
                **librdkafka(config),
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
        except ClientError as exc:
            raise self._error("Initializing", exc) from None

    def write(self, records: Sequence[tuple[bytes | str, bytes | None]], timeout_s: float) -> None:
        """Write ``records`` in one transaction and wait for its commit."""
        errors: list[ClientError] = []
        try:
            self.producer.begin_transaction()
            for key, value in records:
                self.producer.produce(
                    self.topic,
                    key=key,
                    value=value,
                    on_delivery=lambda e, _: errors.append(e) if e else None,
                )
            self.producer.commit_transaction(timeout_s)
        except ClientError as exc:
            raise self._error("Transactional write to", exc) from None
        if errors:
            raise ConnectException(f"Transactional write to {self.topic} failed: {_listed(errors)}")

    def _error(self, what: str, error: ClientError) -> ConnectException:
        fenced = error.local_code == LOCAL_FENCED or error.error_code == ErrorCode.producer_fenced
        kind = ProducerFencedError if fenced else ConnectException
        return kind(f"{what} {self.topic} as {self.transactional_id!r} failed: {error.reason}")

    def close(self) -> None:
        # Nothing is left in flight: every write waited for its commit (or failed).
        self.producer.flush(0)


class TopicLogConsumer:
    """``internal_log.LogConsumer``: assigned partitions, no group offsets; aborted writes of a
    fenced leader are never applied.

    It reads read_committed (unless told otherwise). Its end offsets are the last stable
    offsets, or when asked (always, with ``high_watermark_ends``) the high watermarks,
    listed read_uncommitted by a second consumer as Kafka's ``KafkaBasedLog`` lists them
    through ``TopicAdmin.endOffsets`` (KIP-618's read "to the end": a transaction still
    open, or committed but without its marker yet, is waited for rather than skipped)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        high_watermark_ends: bool = False,
        read_committed: bool = True,
    ) -> None:
        self._config = dict(config)
        self._read_committed = read_committed
        self._always_high_watermark = high_watermark_ends
        self._lister: KafkaConsumer | None = None
        self.consumer = KafkaConsumer(
            {
                **librdkafka(config),
                "group.id": f"connect-log-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                # Offsets written by exactly-once tasks, and config records of a
                # transactional leader, count only once their transaction commits.
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                # Listing end offsets waits behind a long-polling fetch on the same connection.
                "fetch.wait.max.ms": 100,
            }
        )

    def partitions(self, topic: str) -> list[int]:
        return self.consumer.partitions(topic, 10) or []

    def end_offsets(
        self, topic: str, partitions: list[int], timeout_s: float, *, high_watermark: bool = False
    ) -> dict[int, int]:
        """One ListOffsets request for all partitions (timestamp -1: the end). A transient
        failure (a broker just restarted, which librdkafka's metadata has not caught up
        with: _UNKNOWN_PARTITION) is retried until ``timeout_s``, as Java's KafkaBasedLog
        retries its end-offset reads."""
        lister = self.consumer
        if high_watermark or self._always_high_watermark:
            lister = self._high_watermark_lister()
        deadline = time.monotonic() + timeout_s
        backoff_s = 0.1
        while True:
            try:
                found = lister.end_offsets([(topic, p) for p in partitions], 10)
                return {p: offset for (_, p), offset in found.items()}
            except ClientError as exc:
                error = exc
            if not error.retriable or time.monotonic() + backoff_s > deadline:
                raise ConnectException(
                    f"Listing end offsets of {topic} failed: {error.library_text}"
                )
            time.sleep(backoff_s)
            backoff_s = min(1.0, backoff_s * 2)

    def _high_watermark_lister(self) -> KafkaConsumer:
        if not self._read_committed:
            return self.consumer  # its ListOffsets already answers the high watermark
        if self._lister is None:
            self._lister = KafkaConsumer(
                {
                    **librdkafka(self._config),
                    "group.id": f"connect-log-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",
                }
            )
        return self._lister

    def assign(self, topic: str, positions: dict[int, int]) -> None:
        self.consumer.assign([(topic, p, o) for p, o in positions.items()])

    def poll(self, timeout_s: float) -> list[LogRecord]:
        records = self.consumer.consume(500, timeout_s).records
        return [LogRecord(r.partition, r.offset, r.key, r.value) for r in records]

    def positions(self, topic: str, partitions: list[int]) -> dict[int, int]:
        found = self.consumer.positions([(topic, p) for p in partitions])
        return {p: offset for (_, p), offset in found.items()}

    def close(self) -> None:
        self.consumer.close()
        if self._lister is not None:
            self._lister.close()


COMPACT = "compact"
_STORAGE_KEYS = {
    "config": "config.storage.topic",
    "offsets": "offset.storage.topic",
    "status": "status.storage.topic",
}


class InternalTopicAdmin:
    """Creates the internal topics at start and checks they are compacted."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.layer = Admin(client_config(config), timeout=30)

    def cluster_id(self) -> str:
        """For ``GET /`` (Kafka's ``ConnectUtils.lookupKafkaClusterId``)."""
        return self.layer.cluster_id()

    def ensure(self, topics: Mapping[str, tuple[str, int, int]]) -> None:
        """Create each (topic, partitions, replication factor) that is missing, with
        ``cleanup.policy=compact``; fail on an existing one that is not compacted only."""
        existing = set(self.layer.topics())
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
            policy = self.cleanup_policy(topic)
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

    def cleanup_policy(self, topic: str) -> str:
        entry = next(
            (c for c in self.layer.describe_configs("topic", topic) if c.name == "cleanup.policy"),
            None,
        )
        return "delete" if entry is None or entry.value is None else entry.value


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
