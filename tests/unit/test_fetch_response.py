"""The hand-built Fetch response (headers packed around file ranges) against kio's
encoding of the same response, on random inputs: versions, topics, partitions, errors,
aborted lists, empty and non-empty record ranges."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from oncelog.broker.apis.fetch_response import (
    HAND_BUILT,
    FetchAnswer,
    PartitionResult,
    TopicResults,
    kio_response,
)
from oncelog.protocol.messages import encode_response
from oncelog.protocol.response_frame import FileRange

FILE_SIZE = 1 << 16

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
offsets = st.one_of(st.just(-1), st.integers(0, 2**63 - 1))
errors = st.sampled_from(
    [
        ErrorCode.none,
        ErrorCode.offset_out_of_range,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.topic_authorization_failed,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.fetch_session_id_not_found,
    ]
)
aborted_lists = st.one_of(
    st.none(), st.lists(st.tuples(i64, i64), max_size=4).map(tuple)
)  # fmt: skip
# A record range: none, or (position, length) in the file; long enough ones need a
# multi-byte length prefix (compact varint from v12).
ranges = st.one_of(
    st.none(),
    st.integers(0, FILE_SIZE).flatmap(
        lambda pos: st.tuples(st.just(pos), st.integers(0, min(FILE_SIZE - pos, 300)))
    ),
)
partition_specs = st.tuples(st.integers(0, 2**31 - 1), errors, offsets, offsets, offsets,
                            aborted_lists, ranges)  # fmt: skip
topic_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=150)


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, bytes]]:
    path = Path(tmp_path_factory.mktemp("fetch")) / "segment.log"
    data = os.urandom(FILE_SIZE)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


def answer_of(fd: int, version: int, top_error: ErrorCode, session_id: int,
              topics: list[tuple[str, list[tuple]]]) -> FetchAnswer:  # fmt: skip
    results = []
    for name, specs in topics:
        ref: str | uuid.UUID = name if version < 13 else uuid.uuid5(uuid.NAMESPACE_DNS, name)
        parts = [
            PartitionResult(
                (ref, index),
                error,
                hw,
                lso,
                start,
                None if rng is None else FileRange(fd, *rng),
                aborted,
            )  # fmt: skip
            for index, error, hw, lso, start, aborted, rng in specs
        ]
        results.append(TopicResults(ref, parts))
    return FetchAnswer(version, top_error, session_id, results)


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(list(HAND_BUILT)),
    correlation_id=i32,
    top_error=st.sampled_from([ErrorCode.none, ErrorCode.fetch_session_id_not_found]),
    session_id=i32,
    topics=st.lists(
        st.tuples(topic_names, st.lists(partition_specs, max_size=5)),
        max_size=4,
        unique_by=lambda t: t[0],
    ),
)
def test_hand_built_frame_equals_kio_encoding(
    segment: tuple[int, bytes],
    version: int,
    correlation_id: int,
    top_error: ErrorCode,
    session_id: int,
    topics: list[tuple[str, list[tuple]]],
) -> None:
    fd, _ = segment
    reference = encode_response(
        1, version, correlation_id,
        kio_response(answer_of(fd, version, top_error, session_id, topics)),
    )  # fmt: skip
    frame = answer_of(fd, version, top_error, session_id, topics).frame(correlation_id)
    assert frame.size == len(reference)
    assert frame.to_bytes() == reference
    frame.close()
    assert all(r.fd == -1 for r in frame.ranges())


def test_record_ranges_stay_file_ranges(segment: tuple[int, bytes]) -> None:
    """The records are never copied into the headers: each non-empty range is its own
    part of the frame, exactly the file's bytes."""
    fd, data = segment
    answer = answer_of(fd, 16, ErrorCode.none, 7, [
        ("t", [(0, ErrorCode.none, 10, 10, 0, (), (100, 200)),
               (1, ErrorCode.none, 5, 5, 0, None, (0, 0)),
               (2, ErrorCode.none, 5, 5, 0, None, (300, 50))]),
    ])  # fmt: skip
    frame = answer.frame(3)
    ranges = list(frame.ranges())
    assert [(r.position, r.length) for r in ranges] == [(100, 200), (300, 50)]
    assert [r.read() for r in ranges] == [data[100:300], data[300:350]]
    assert len(frame.parts) == 5  # header, range, header, range, trailer
    frame.close()


def test_versions_outside_the_hand_built_range_go_through_kio(segment: tuple[int, bytes]) -> None:
    fd, data = segment
    version = 18  # kio knows it, the hand-built encoder does not
    assert version not in HAND_BUILT
    spec = (0, ErrorCode.none, 10, 10, 0, (), (0, 64))
    answer = answer_of(fd, version, ErrorCode.none, 0, [("t", [spec])])
    frame = answer.frame(9)
    assert len(frame.parts) == 1 and isinstance(frame.parts[0], bytes)
    reference = encode_response(1, version, 9, kio_response(
        answer_of(fd, version, ErrorCode.none, 0, [("t", [spec])])))  # fmt: skip
    assert frame.to_bytes() == reference
    assert data[:64] in reference
