"""Our client decodes Kafka's DescribeTransactions ``TransactionStartTimeMs = -1``, which
kio's own decoder refuses."""

from __future__ import annotations

import datetime

import pytest
from kio._kio_native import tz_aware_from_i64
from kio.schema.describe_transactions.v0 import response as kio_dt
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.primitive import i64

from oncelog.client.wire import WireClient
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import encode_response, make


def frame(start_ms: int) -> bytes:
    state = make(
        kio_dt.TransactionState,
        error_code=ErrorCode.none,
        transactional_id="t",
        transaction_state="Empty",
        transaction_timeout=datetime.timedelta(seconds=60),
        transaction_start_time=tz_aware_from_i64(i64(start_ms)),  # as the broker sends it
        producer_id=7,
        producer_epoch=2,
        topics=(make(kio_dt.TopicData, topic="x", partitions=(0, 3)),),
    )
    resp = make(kio_dt.DescribeTransactionsResponse, transaction_states=(state,))
    return encode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, 5, resp)[4:]


def test_minus_one_decodes_as_not_started() -> None:
    data = frame(-1)
    with pytest.raises(Exception, match="negative timestamp"):
        _, pos = entity_reader(kio_dt.DescribeTransactionsResponse.__header_schema__)(data, 0)
        entity_reader(kio_dt.DescribeTransactionsResponse)(data, pos)
    resp = WireClient.decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, data, 5)
    (state,) = resp.transaction_states
    assert (state.transaction_start_time_ms, state.transaction_start_time) == (-1, None)
    assert (state.producer_id, state.producer_epoch, state.transaction_state) == (7, 2, "Empty")
    assert state.transaction_timeout == datetime.timedelta(seconds=60)
    assert [(t.topic, t.partitions) for t in state.topics] == [("x", (0, 3))]


def test_a_start_time_decodes_as_an_aware_datetime() -> None:
    resp = WireClient.decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, frame(1_700_000_000_123), 5)
    (state,) = resp.transaction_states
    assert state.transaction_start_time_ms == 1_700_000_000_123
    assert state.transaction_start_time == datetime.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.UTC
    )
