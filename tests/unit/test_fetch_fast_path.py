"""The Fetch handler's zero-copy answer against the straightforward path, on random logs.

Random batches (plain, compressed, transactional with commits, aborts and still-open
transactions) go into a partition; random Fetch requests (version, isolation level,
offset, size limits) are answered by the real handler. The hand-built frame must equal
kio's encoding of the same answer with the records read into bytes, its record bytes
must be exactly the log's bytes for that read, no batch may reach past the high
watermark (read_uncommitted) or the LSO (read_committed), and the aborted list must be
exactly the aborted transactions that overlap the fetched range.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from oncelog.broker.apis.fetch import fetch
from oncelog.broker.apis.fetch_response import FetchAnswer, kio_response
from oncelog.broker.broker import Broker
from oncelog.broker.config import BrokerConfig
from oncelog.broker.request import RequestContext
from oncelog.protocol.messages import RequestHeader, encode_response, make
from oncelog.records.batch import parse_header
from oncelog.records.compression import CompressionType

from .test_storage_support import NOW, make_batch, make_marker

_topic_numbers = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data = Path(tmp_path_factory.mktemp("fetch-fast-path"))
    b = Broker(BrokerConfig.build(overrides={"log.dirs": str(data)}), listen=("127.0.0.1", 0))
    b.topics.load()
    yield b
    b.topics.close()


# One step of a log's history: plain records, a transactional batch of producer p, or
# the end (commit/abort) of p's open transaction.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), st.integers(1, 5), st.sampled_from(list(CompressionType))),
        st.tuples(
            st.just("txn"),
            st.integers(1, 3),
            st.integers(1, 5),
            st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
        ),
        st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    ),  # fmt: skip
    min_size=1,
    max_size=25,
)


def fill(broker: Broker, plan: list[tuple[Any, ...]]) -> tuple[str, set[tuple[int, int, int]]]:
    """A new topic holding ``plan``; returns its name and the aborted transactions as
    (producer_id, first_offset, marker_offset)."""
    name = f"fast-{next(_topic_numbers)}"
    broker.topics.create(name, 1, {})
    log = broker.topics.partition(name, 0)
    assert log is not None
    seqs = {1: 0, 2: 0, 3: 0}
    open_first: dict[int, int] = {}
    aborted: set[tuple[int, int, int]] = set()
    for step in plan:
        if step[0] == "plain":
            raw, header = make_batch(step[1], compression=step[2], value_size=40)
            log.append(raw, header, now_ms=NOW)
        elif step[0] == "txn":
            _, pid, count, compression = step
            raw, header = make_batch(count, producer_id=pid, epoch=0, seq=seqs[pid],
                                     transactional=True, compression=compression)  # fmt: skip
            seqs[pid] += count
            first = log.append(raw, header, now_ms=NOW).base_offset
            open_first.setdefault(pid, first)
        elif step[1] in open_first:
            _, pid, commit = step
            raw, header = make_marker(pid, 0, commit)
            marker = log.append_control(raw, header, now_ms=NOW).base_offset
            first = open_first.pop(pid)
            if not commit:
                aborted.add((pid, first, marker))
    return name, aborted


def request(version: int, broker: Broker, name: str, offset: int, part_max: int,
            max_bytes: int, committed: bool) -> Any:  # fmt: skip
    mod = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    topic = broker.topics.topics[name]
    named = {"topic_id": topic.topic_id} if version >= 13 else {"topic": name}
    return make(
        mod.FetchRequest,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=1 if committed else 0,
        session_id=0,
        session_epoch=-1,
        topics=(
            make(
                mod.FetchTopic,
                partitions=(
                    make(
                        mod.FetchPartition,
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=part_max,
                    ),
                ),
                **named,
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def answer(broker: Broker, version: int, req: Any) -> FetchAnswer:
    ctx = RequestContext(broker, RequestHeader(1, version, 1, "test"), 1, "test")
    result = asyncio.run(fetch(ctx, req))
    assert isinstance(result, FetchAnswer)
    return result


@settings(max_examples=100, deadline=None)
@example(  # an aborted transaction, a committed one, then one still open (LSO < HW)
    plan=[
        ("txn", 1, 2, CompressionType.NONE),
        ("plain", 1, CompressionType.ZSTD),
        ("end", 1, False),
        ("txn", 2, 3, CompressionType.GZIP),
        ("end", 2, True),
        ("txn", 3, 1, CompressionType.NONE),
        ("plain", 2, CompressionType.NONE),
    ],
    version=16,
    committed=True,
    offset_pick=0.0,
    part_max=3000,
    max_bytes=6000,
)
@given(
    plan=steps,
    version=st.integers(4, 17),
    committed=st.booleans(),
    offset_pick=st.floats(0, 1.05),
    part_max=st.integers(1, 3000),
    max_bytes=st.integers(1, 6000),
)
def test_fast_path_equals_the_straightforward_path(
    broker: Broker,
    plan: list[tuple[Any, ...]],
    version: int,
    committed: bool,
    offset_pick: float,
    part_max: int,
    max_bytes: int,
) -> None:
    name, aborted = fill(broker, plan)
    log = broker.topics.partition(name, 0)
    assert log is not None
    offset = int(offset_pick * log.log_end_offset)
    req = request(version, broker, name, offset, part_max, max_bytes, committed)

    reference = encode_response(1, version, 42, kio_response(answer(broker, version, req)))
    frame = answer(broker, version, req).frame(42)
    got = frame.to_bytes()
    frame.close()
    assert got == reference

    # Decode the frame (size prefix, header) and check what it serves.
    mod = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    header_bytes = 5 if version >= 12 else 4
    body, _ = entity_reader(mod.FetchResponse)(memoryview(got), 4 + header_bytes)
    (topic,) = body.responses
    (part,) = topic.partitions
    if offset > log.log_end_offset:
        assert part.error_code == ErrorCode.offset_out_of_range
        return
    assert part.error_code == ErrorCode.none
    assert (part.high_watermark, part.last_stable_offset) == (
        log.high_watermark,
        log.last_stable_offset,
    )
    bound = log.last_stable_offset if committed else log.high_watermark
    data = log.read(offset, min(part_max, max_bytes), max_offset=bound, min_one=True)
    assert part.records == (b"" if data is None else data.read())
    pos = 0
    while pos < len(part.records):
        header = parse_header(part.records, pos)
        assert header.base_offset < bound and header.last_offset >= offset
        pos += header.size
    if not committed:
        assert part.aborted_transactions is None
    elif data is None:
        assert part.aborted_transactions == ()
    else:
        expected = {(pid, first) for pid, first, marker in aborted
                    if marker >= offset and first < bound}  # fmt: skip
        got_aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions]
        assert sorted(got_aborted) == sorted(expected)
