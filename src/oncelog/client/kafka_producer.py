"""confluent-kafka's producer behind the client layer: idempotent or transactional (Kafka's
``KafkaProducer``) for the CLI, the demo and the Connect worker.

librdkafka does the work; this module only keeps its types out of the callers: a delivery
report is a :class:`Delivered` or a :class:`~oncelog.client.errors.ClientError`, and every
failed call raises a ClientError by Kafka error code
(:func:`~oncelog.client.errors.from_kafka_error`). oncelog's own producer, for what
librdkafka cannot do (two-phase commit), is :mod:`.producer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oncelog.client.config import ClientConfig
from oncelog.client.errors import (
    LOCAL_QUEUE_FULL,
    ClientError,
    call,
    flush_in_steps,
    from_kafka_error,
    poll_in_steps,
)

Headers = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class Delivered:
    """An acknowledged record (Java's ``RecordMetadata``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms since the epoch


DeliveryCallback = Callable[[ClientError | None, Delivered | None], None]


class KafkaProducer:
    """One librdkafka producer. ``conf`` is librdkafka's configuration with
    ``bootstrap.servers``; ``transactional.id`` in it makes the producer transactional.
    A configuration librdkafka refuses (an unknown key, a bad value) raises a ClientError."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        from confluent_kafka import Producer

        self._producer = call("creating a producer", Producer, dict(conf))

    @classmethod
    def of(cls, config: ClientConfig, **settings: Any) -> KafkaProducer:
        """A producer of the cluster ``config`` reaches, with these librdkafka settings."""
        return cls(config.librdkafka(**settings))

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | str | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        on_delivery: DeliveryCallback | None = None,
        wait_for_space: bool = True,
    ) -> None:
        """Queue one record. With a full buffer, serve delivery reports until there is room
        (``wait_for_space``) or raise a ClientError (librdkafka's _QUEUE_FULL). A producer in
        a fatal or abortable transactional state raises its ClientError."""
        from confluent_kafka import KafkaException

        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        if headers:
            kwargs["headers"] = list(headers)
        if on_delivery is not None:
            kwargs["on_delivery"] = _report(on_delivery)
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, **kwargs)
                return
            except BufferError as exc:
                if not wait_for_space:
                    raise ClientError(
                        f"Produce to {topic}: {exc}",
                        retriable=True,
                        local_code=LOCAL_QUEUE_FULL,
                        name="_QUEUE_FULL",
                        detail=str(exc),
                    ) from exc
                self._producer.poll(0.1)
            except KafkaException as exc:
                raise from_kafka_error(exc, f"Produce to {topic}") from exc

    def poll(self, timeout_s: float) -> int:
        """Serve delivery reports (and librdkafka's logs) for up to ``timeout_s``."""
        return poll_in_steps(self._producer, timeout_s)

    def flush(self, timeout_s: float) -> int:
        """Wait for every queued record; returns how many are still unacknowledged."""
        return flush_in_steps(self._producer, timeout_s)

    # -- transactions (KIP-98) -----------------------------------------------------------------
    # (A timeout of None waits as long as librdkafka's default: without a bound.)
    def init_transactions(self, timeout_s: float | None = None) -> None:
        """InitProducerId: fences every earlier producer of the transactional id."""
        call("InitProducerId", self._producer.init_transactions, *_timeout(timeout_s))

    def begin_transaction(self) -> None:
        call("BeginTransaction", self._producer.begin_transaction)

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        call("EndTxn(commit)", self._producer.commit_transaction, *_timeout(timeout_s))

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        call("EndTxn(abort)", self._producer.abort_transaction, *_timeout(timeout_s))


def _timeout(timeout_s: float | None) -> tuple[float, ...]:
    return () if timeout_s is None else (timeout_s,)


def _report(on_delivery: DeliveryCallback) -> Callable[[Any, Any], None]:
    def report(err: Any, msg: Any) -> None:
        if err is not None:
            on_delivery(from_kafka_error(err, f"Delivery to {msg.topic()}"), None)
        else:
            on_delivery(
                None, Delivered(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])
            )

    return report
