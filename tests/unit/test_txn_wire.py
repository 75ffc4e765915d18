"""The hand-encoded EndTxn and AddPartitionsToTxn responses against kio (Hypothesis).

Every version the broker serves, random error codes, producer ids, epochs, topics and
partitions: the frame must be byte-identical to kio's encoding of the response the
handlers built before, and request metrics must find the same errors in it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from oncelog.broker.request_stats import response_errors
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import encode_response, make, response_module
from oncelog.protocol.txn_wire import (
    ADD_PARTITIONS_LAST_UNBATCHED,
    encode_add_partitions_v3_and_below,
    encode_end_txn,
)

END_TXN = int(ApiKey.END_TXN)
ADD_PARTITIONS = int(ApiKey.ADD_PARTITIONS_TO_TXN)

errors = st.sampled_from(list(ErrorCode))
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
correlation_ids = i32
names = st.text(min_size=1, max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 5), errors, i64, i16, correlation_ids)
def test_end_txn_equals_kio(
    version: int, code: ErrorCode, producer_id: int, producer_epoch: int, correlation_id: int
) -> None:
    r = response_module(END_TXN, version)
    expected_response = make(
        r.EndTxnResponse, error_code=code, producer_id=producer_id, producer_epoch=producer_epoch
    )
    expected = encode_response(END_TXN, version, correlation_id, expected_response)
    hand = encode_end_txn(version, code, producer_id, producer_epoch)
    assert encode_response(END_TXN, version, correlation_id, hand) == expected
    assert response_errors(hand) == response_errors(expected_response)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, ADD_PARTITIONS_LAST_UNBATCHED),
    st.lists(st.tuples(names, st.lists(st.tuples(i32, errors), max_size=6)), max_size=6),
    correlation_ids,
)
def test_add_partitions_equals_kio(
    version: int, topics: list[tuple[str, list[tuple[int, ErrorCode]]]], correlation_id: int
) -> None:
    r = response_module(ADD_PARTITIONS, version)
    expected_response = make(
        r.AddPartitionsToTxnResponse,
        results_by_topic_v3_and_below=tuple(
            make(
                r.AddPartitionsToTxnTopicResult,
                name=name,
                results_by_partition=tuple(
                    make(
                        r.AddPartitionsToTxnPartitionResult,
                        partition_index=p,
                        partition_error_code=code,
                    )
                    for p, code in parts
                ),
            )
            for name, parts in topics
        ),
    )
    expected = encode_response(ADD_PARTITIONS, version, correlation_id, expected_response)
    hand = encode_add_partitions_v3_and_below(version, topics)
    assert encode_response(ADD_PARTITIONS, version, correlation_id, hand) == expected
    assert response_errors(hand) == response_errors(expected_response) is None


def test_batched_add_partitions_is_left_to_kio() -> None:
    with pytest.raises(ValueError):
        encode_add_partitions_v3_and_below(ADD_PARTITIONS_LAST_UNBATCHED + 1, [])
