"""A librdkafka producer that sends records column by column: idempotent, or
transactional with the transaction left to its caller (the Spark sink leaves it open for
the driver to commit).

The hot path is one C call per record with positional arguments; delivery failures are
collected (at most :data:`MAX_ERRORS`) rather than raised from librdkafka's callback, and
every librdkafka error becomes a :class:`~oncelog.client.errors.ClientError` by its Kafka
error code (:func:`~oncelog.client.errors.from_kafka_error`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from oncelog.client.errors import call, flush_in_steps

MAX_ERRORS = 20
ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: its partitioner chooses


class RecordProducer:
    """One librdkafka producer. ``conf`` is librdkafka's configuration, ``bootstrap.servers``
    included; ``transactional.id`` in it makes the producer transactional."""

    def __init__(self, conf: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        errors: list[str] = []

        # A closure over the list, not a bound method: no reference cycle, so dropping the
        # last reference destroys the librdkafka instance at once.
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None and len(errors) < MAX_ERRORS:
                errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

        self.errors = errors
        self._producer = Producer(
            {**conf, "delivery.report.only.error": True, "on_delivery": on_delivery}
        )

    def init_transactions(self, timeout_s: float) -> None:
        """InitProducerId: fences any earlier incarnation of the transactional id."""
        call("InitProducerId", self._producer.init_transactions, timeout_s)

    def begin_transaction(self) -> None:
        call("begin transaction", self._producer.begin_transaction)

    def abort_transaction(self, timeout_s: float) -> None:
        call("EndTxn(abort)", self._producer.abort_transaction, timeout_s)

    def send(
        self,
        topics: Iterable[str],
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None],
        partitions: Iterable[int],
        headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
    ) -> None:
        """Queue one record per row (``partitions``: :data:`ANY_PARTITION` lets librdkafka's
        partitioner choose); waits for room when librdkafka's queue is full."""
        produce, poll = self._producer.produce, self._producer.poll
        if headers is None:
            for topic, value, key, partition in zip(topics, values, keys, partitions, strict=True):
                while True:
                    try:
                        produce(topic, value, key, partition)
                        break
                    except BufferError:
                        poll(0.05)
        else:
            for topic, value, key, partition, hs in zip(
                topics, values, keys, partitions, headers, strict=True
            ):
                while True:
                    try:
                        produce(topic, value, key, partition, headers=hs)
                        break
                    except BufferError:
                        poll(0.05)
        poll(0)

    def partition_count(self, topic: str, timeout_s: float) -> int:
        """Partitions of ``topic`` in a fresh Metadata answer (0: no such topic)."""
        meta = call("Metadata", self._producer.list_topics, topic, timeout_s)
        info = meta.topics.get(topic)
        return len(info.partitions) if info is not None and info.error is None else 0

    def flush(self, timeout_s: float) -> int:
        """Wait for every queued record's acknowledgement; the number still undelivered."""
        return flush_in_steps(self._producer, timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued (within the timeout) and let the instance go. Destroying a
        transactional producer never ends its open transaction."""
        flush_in_steps(self._producer, timeout_s)
