"""The client layer's retry policy and error classification (no broker)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from kio.schema.errors import ErrorCode

from oncelog.client.errors import ClientError, check, from_kafka_error
from oncelog.client.retry import RetryPolicy


class Flaky:
    def __init__(self, failures: list[BaseException], result: str = "ok") -> None:
        self.failures = failures
        self.result = result
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.result


FAST = RetryPolicy(deadline_s=5.0, initial_backoff_s=0.001, max_backoff_s=0.01)


def test_retriable_codes_are_retried_until_success() -> None:
    fn = Flaky(
        [
            ClientError("x", ErrorCode.not_coordinator),
            ClientError("x", ErrorCode.concurrent_transactions),
            ConnectionResetError(),
        ]
    )
    seen: list[BaseException] = []
    assert FAST.call(fn, on_retry=seen.append) == "ok"
    assert fn.calls == 4
    assert [type(e) for e in seen] == [ClientError, ClientError, ConnectionResetError]


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.producer_fenced,
        ErrorCode.transactional_id_not_found,
        ErrorCode.invalid_txn_state,
        ErrorCode.sasl_authentication_failed,
    ],
)
def test_fatal_codes_fail_at_once(code: ErrorCode) -> None:
    fn = Flaky([ClientError("boom", code)])
    with pytest.raises(ClientError) as info:
        FAST.call(fn)
    assert fn.calls == 1 and info.value.error_code == code and not info.value.retriable


def test_other_exceptions_are_not_retried() -> None:
    fn = Flaky([ValueError("bug")])
    with pytest.raises(ValueError):
        FAST.call(fn)
    assert fn.calls == 1


def test_deadline_is_honoured() -> None:
    policy = RetryPolicy(deadline_s=0.6, initial_backoff_s=0.02, max_backoff_s=0.1)
    fn = Flaky([ClientError("busy", ErrorCode.coordinator_load_in_progress)] * 1000)
    started = time.monotonic()
    with pytest.raises(ClientError) as info:
        policy.call(fn)
    elapsed = time.monotonic() - started
    assert 0.4 <= elapsed <= 0.6 + 0.05, elapsed  # never sleeps past the deadline
    assert 5 <= fn.calls < 50  # exponential backoff, capped at 0.1 s
    assert (
        info.value.error_code == ErrorCode.coordinator_load_in_progress
    )  # the last error, as it was


def test_connection_failures_end_as_network_exception() -> None:
    policy = RetryPolicy(deadline_s=0.2, initial_backoff_s=0.01, max_backoff_s=0.05)
    with pytest.raises(ClientError) as info:
        policy.call(Flaky([ConnectionRefusedError("refused")] * 1000))
    assert info.value.error_code == ErrorCode.network_exception and info.value.retriable


def test_classification_reads_the_code_never_the_message() -> None:
    # The message names a retriable error; the code is fatal: the code wins.
    fn = Flaky(
        [ClientError("NOT_COORDINATOR COORDINATOR_LOAD_IN_PROGRESS", ErrorCode.producer_fenced)]
    )
    with pytest.raises(ClientError):
        FAST.call(fn)
    assert fn.calls == 1
    # And a retriable code with an unhelpful message is retried.
    fn = Flaky([ClientError("?", ErrorCode.not_leader_or_follower)])
    assert FAST.call(fn) == "ok" and fn.calls == 2


def test_check_raises_the_code() -> None:
    check(ErrorCode.none, "fine")
    with pytest.raises(ClientError, match="EndTxn: INVALID_PRODUCER_EPOCH") as info:
        check(ErrorCode.invalid_producer_epoch, "EndTxn")
    assert info.value.error_code == ErrorCode.invalid_producer_epoch


def test_confluent_errors_are_classified_by_code() -> None:
    broker = from_kafka_error(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)), "OffsetFetch")
    assert (
        broker.error_code == ErrorCode.not_coordinator
        and broker.retriable
        and broker.local_code is None
    )
    assert "NOT_COORDINATOR" in str(broker)
    exists = from_kafka_error(
        KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'x' already exists."), "CreateTopics"
    )
    assert exists.error_code == ErrorCode.topic_already_exists and not exists.retriable
    assert "already exists" in str(exists)
    local = from_kafka_error(KafkaError(KafkaError._TIMED_OUT), "Metadata")
    assert (
        local.error_code is None and local.local_code == KafkaError._TIMED_OUT and local.retriable
    )
    unknown_local = from_kafka_error(KafkaError(KafkaError._INVALID_ARG), "ListOffsets")
    assert unknown_local.error_code is None and not unknown_local.retriable
    fatal = from_kafka_error(KafkaError(KafkaError.NOT_COORDINATOR, fatal=True), "x")
    assert not fatal.retriable  # librdkafka declared the client unusable
