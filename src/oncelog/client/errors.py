"""Errors of the client layer, classified by Kafka error code, never by message text.

Broker answers carry a Kafka error code (kio's ``ErrorCode``); confluent-kafka reports a
``KafkaError`` whose ``code()`` is the same number for broker errors, or a negative
librdkafka code for local conditions (timeouts, lost connections). Both end up here as one
:class:`ClientError` with an ``error_code`` (or ``local_code``) and the flags callers decide
by: ``retriable`` (the retry policy reads it), ``fatal`` and ``abortable``. Callers test
codes and flags, never the text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from kio.schema.errors import ErrorCode

# librdkafka's local error codes that mean "not reachable or not known yet": worth another
# attempt within the caller's deadline.
_LOCAL_RETRIABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._NOENT,  # a topic-partition not (yet) in the client's metadata cache
        KafkaError._RETRY,
        KafkaError._WAIT_CACHE,
    }
)

T = TypeVar("T")

# librdkafka's local codes that callers tell apart.
LOCAL_FENCED = KafkaError._FENCED  # this transactional producer was fenced (fatal)
LOCAL_PARTITION_EOF = KafkaError._PARTITION_EOF  # a consumer reached a partition's end
LOCAL_QUEUE_FULL = KafkaError._QUEUE_FULL  # the producer's buffer is full


class ClientError(RuntimeError):
    """A failed call to the cluster. ``error_code`` is the Kafka error code when the broker
    (or librdkafka, for its local codes: ``local_code``) gave one. ``fatal``: the client
    instance is unusable (librdkafka's fatal errors, e.g. a fenced transactional producer);
    ``abortable``: the open transaction must be aborted (Java's TransactionAbortableException).
    ``what`` (the call that failed), ``name`` (Kafka's, or librdkafka's for a local code) and
    ``detail`` (the description) are for messages only, as is ``library_text``:
    confluent-kafka's own rendering (``KafkaError{code=...,val=...,str="..."}``), which some
    commands have always printed."""

    def __init__(
        self,
        message: str,
        error_code: ErrorCode | None = None,
        *,
        retriable: bool | None = None,
        local_code: int | None = None,
        fatal: bool = False,
        abortable: bool = False,
        what: str | None = None,
        name: str | None = None,
        detail: str | None = None,
        library_text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.local_code = local_code
        self.fatal = fatal
        self.abortable = abortable
        self.what = what
        self.name = name if name is not None else (error_code.name.upper() if error_code else None)
        self.detail = detail
        self.library_text = library_text if library_text is not None else message
        if retriable is None:
            retriable = (
                error_code.retriable if error_code is not None else local_code in _LOCAL_RETRIABLE
            )
        self.retriable = retriable

    @property
    def code(self) -> int | None:
        """The error's number: the Kafka error code, else librdkafka's local code."""
        return int(self.error_code) if self.error_code is not None else self.local_code

    @property
    def reason(self) -> str:
        """``NAME (description)`` without what failed, for callers that say that themselves."""
        if self.name is None or self.detail is None:
            return str(self)
        return f"{self.name} ({self.detail})"


class AuthenticationError(ClientError):
    """SASL or TLS handshake refused: never retried."""

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        super().__init__(message, error_code, retriable=False)


def check(code: ErrorCode, what: str) -> None:
    """Raise the ClientError of a broker error code (``what`` names the call)."""
    if code != ErrorCode.none:
        raise ClientError(f"{what}: {code.name.upper()}", code)


def error_code(code: int) -> ErrorCode | None:
    """kio's ErrorCode for a Kafka error number, None for librdkafka-local codes."""
    try:
        return ErrorCode(code)
    except ValueError:
        return None


def from_kafka_error(err: Any, what: str) -> ClientError:
    """A ClientError from confluent-kafka's KafkaError (or a KafkaException wrapping one)."""
    if hasattr(err, "args") and err.args and hasattr(err.args[0], "code"):
        err = err.args[0]
    code = int(err.code())
    kafka_code = error_code(code) if code >= 0 else None
    name = kafka_code.name.upper() if kafka_code is not None else err.name()
    fatal = bool(err.fatal())
    abortable = bool(err.txn_requires_abort()) if hasattr(err, "txn_requires_abort") else False
    return ClientError(
        f"{what}: {name} ({err.str()})",
        kafka_code,
        retriable=False if fatal else None,
        local_code=None if code >= 0 else code,
        fatal=fatal,
        abortable=abortable,
        what=what,
        name=name,
        detail=err.str(),
        library_text=str(err),
    )


# confluent-kafka splits a wait of 200 ms or more into chunks, and a fatal error raised in
# one chunk is lost when a later callback (its logger's) runs: the call then fails with
# "SystemError: ... returned NULL without setting an exception" instead of the fatal
# KafkaException (a producer fenced, or its transactional id no longer authorized). Below
# that it waits in one call and the exception survives, so long waits are taken in steps.
WAIT_STEP_S = 0.15


def flush_in_steps(producer: Any, timeout_s: float) -> int:
    """``producer.flush(timeout_s)`` of confluent-kafka, waited in steps so that a fatal
    error is raised as its KafkaException; returns how many records are undelivered."""
    deadline = time.monotonic() + timeout_s
    while True:
        step = min(WAIT_STEP_S, max(0.0, deadline - time.monotonic()))
        left = int(call("Flush", producer.flush, step))
        if not left or time.monotonic() >= deadline:
            return left


def poll_in_steps(producer: Any, timeout_s: float) -> int:
    """``producer.poll(timeout_s)``, in steps as :func:`flush_in_steps`; returns the number
    of events served (it returns as soon as one step served any)."""
    deadline = time.monotonic() + timeout_s
    while True:
        step = min(WAIT_STEP_S, max(0.0, deadline - time.monotonic()))
        served = int(call("Poll", producer.poll, step))
        if served or time.monotonic() >= deadline:
            return served


def call(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` of a confluent-kafka client, its KafkaException raised as the
    ClientError of ``what``."""
    try:
        return fn(*args, **kwargs)
    except KafkaException as exc:
        raise from_kafka_error(exc, what) from exc
