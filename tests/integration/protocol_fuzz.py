"""A schema-aware protocol fuzzer for the broker, and the oracles that judge it.

Frames come from two sources:
- Hypothesis strategies derived from kio's request classes (every advertised API
  and version, plus versions and API keys the broker does not serve): nulls where
  the schema allows them, empty and large arrays, boundary integers, internal topic
  names, cross-API bodies (one API's body under another's header);
- cheap byte mutations of those frames and of captured valid ones: bit flips,
  forged counts and lengths (-1, 0, huge), truncation, garbage tails.

A ``FuzzConnection`` pipelines frames and checks that every response carries the
correlation id of the oldest unanswered request (responses in request order). A
``Canary`` produces one acks=all record at a time on its own connection and records
each round trip, so stalls and losses are measured, not guessed.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import multiprocessing
import multiprocessing.synchronize
import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_rq
from kio.schema.produce.v9 import request as produce_rq
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from oncelog.broker.apis.registry import API_SPECS
from oncelog.client.wire import WireClient
from oncelog.records.builder import build_batch, iter_records

_SIZE = struct.Struct(">i")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
NAMES = (*INTERNAL_TOPICS, "fz", "fz-2", "", "..", "a" * 300, "grp", "txn", "__fz")
SERVED = {spec.key: (spec.min_version, spec.max_version) for spec in API_SPECS}


# -- schema-aware strategies ------------------------------------------------------------
def _ints(bits: int, signed: bool = True) -> st.SearchStrategy[int]:
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    edges = [v for v in (lo, hi, -1, 0, 1, 2, 3, 1000) if lo <= v <= hi]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(lo, hi),
        st.integers(-2, 100).filter(lambda v: lo <= v <= hi),
    )


def _small_ms() -> st.SearchStrategy[int]:
    # Timeouts stay short: a long-poll on the fuzz connection would only slow the run.
    return st.one_of(st.sampled_from([-1, 0, 1, 100]), st.integers(0, 300))


_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "int8": _ints(8),
    "int16": _ints(16),
    "int32": _ints(32),
    "int64": _ints(64),
    "uint16": _ints(16, signed=False),
    "uint32": _ints(32, signed=False),
    "bool": st.booleans(),
    "float64": st.floats(allow_nan=True),
    "uuid": st.one_of(st.uuids(), st.just(uuid.UUID(int=1))),
    "string": st.one_of(st.sampled_from(NAMES), st.text(max_size=12)),
    "bytes": st.binary(max_size=64),
    "records": st.one_of(
        st.binary(max_size=80),
        st.builds(lambda v: bytes(build_batch([(None, v, None, 0)])), st.binary(max_size=32)),
    ),
    "error_code": st.sampled_from(list(ErrorCode)),
    "timedelta_i32": _small_ms().map(lambda ms: datetime.timedelta(milliseconds=ms)),
    "timedelta_i64": _small_ms().map(lambda ms: datetime.timedelta(milliseconds=ms)),
    "datetime_i64": st.integers(0, 2**41).map(
        lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    ),
}


@cache
def entity_strategy(cls: type, top: bool = False) -> st.SearchStrategy[Any]:
    """Instances of a kio class; only the request's own arrays may be huge, so sizes
    do not multiply down the nesting."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            inner = st.deferred(lambda t=kind.type_: entity_strategy(t))
            strat: st.SearchStrategy[Any] = _array(inner, top).map(tuple)
        elif isinstance(kind, EntityField):
            strat = st.deferred(lambda t=kind.type_: entity_strategy(t))
        elif isinstance(kind, PrimitiveTupleField):
            strat = _array(_PRIMITIVES[f.metadata["kafka_type"]], top).map(tuple)
        else:
            strat = _PRIMITIVES[f.metadata["kafka_type"]]
        if is_optional(f):
            strat = st.one_of(st.none(), strat)
        fields[f.name] = strat
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _array(inner: st.SearchStrategy[Any], huge: bool) -> st.SearchStrategy[list[Any]]:
    # "huge" arrays repeat drawn items: cheap to generate, large for a handler
    small = st.lists(inner, max_size=2)
    if not huge:
        return small
    return st.one_of(
        small, small, small, st.tuples(small, st.integers(20, 400)).map(lambda p: p[0] * p[1])
    )


def _api_versions() -> list[tuple[int, int]]:
    pairs = []
    for key, (lo, hi) in SERVED.items():
        for v in range(max(0, lo - 1), hi + 2):
            try:
                load_request_schema(key, v)
            except Exception:
                continue
            pairs.append((key, v))
    return pairs


API_VERSIONS = _api_versions()


def encode(
    request: Any, correlation_id: int, api_key: int | None = None, version: int | None = None
) -> bytes:
    """A size-prefixed frame; ``api_key``/``version`` in the header may lie (cross-API)."""
    header_schema = request.__header_schema__
    buf = io.BytesIO()
    header = header_schema(
        request_api_key=request.__api_key__ if api_key is None else api_key,
        request_api_version=request.__version__ if version is None else version,
        correlation_id=correlation_id,
        client_id="fz",
    )
    entity_writer(header_schema)(buf, header)
    entity_writer(type(request))(buf, request)
    body = buf.getvalue()
    return _SIZE.pack(len(body)) + body


@st.composite
def request_frames(draw: st.DrawFn) -> bytes:
    """One frame (correlation id 0, patched on send): a generated request, maybe
    under another API's header."""
    key, version = draw(st.sampled_from(API_VERSIONS))
    request = draw(entity_strategy(load_request_schema(key, version), top=True))
    try:
        if draw(st.integers(0, 9)) == 0:
            other_key, other_version = draw(st.sampled_from(API_VERSIONS))
            return encode(request, 0, other_key, other_version)
        return encode(request, 0)
    except Exception:  # a drawn value kio refuses to write: send a valid ApiVersions v0
        return API_VERSIONS_V0


API_VERSIONS_V0 = _SIZE.pack(10) + struct.pack(">hhih", 18, 0, 0, -1)


# -- byte mutations -----------------------------------------------------------------------
def mutate(frame: bytes, rnd: random.Random) -> bytes:
    """A mutant of ``frame`` whose size prefix is kept consistent (so the stream stays
    in sync) unless the mutation is about the prefix itself."""
    body = bytearray(frame[4:])
    header_end = min(len(body), 8)
    choice = rnd.randrange(8)
    if choice == 0 and len(body) > header_end:  # bit flips in the body
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(header_end, len(body))
            body[i] ^= 1 << rnd.randrange(8)
    elif choice in (1, 2) and len(body) > header_end + 4:  # forged i32 count / length
        i = rnd.randrange(header_end, len(body) - 3)
        body[i : i + 4] = _SIZE.pack(rnd.choice([-1, 0, 1, 0x7FFFFFFF, -2, 65536]))
    elif choice == 3 and len(body) > header_end + 2:  # forged i16 length / null string
        i = rnd.randrange(header_end, len(body) - 1)
        body[i : i + 2] = struct.pack(">h", rnd.choice([-1, 0, 0x7FFF, 1]))
    elif choice == 4 and len(body) > header_end:  # compact length/count 0 (= null) or huge
        i = rnd.randrange(header_end, len(body))
        body[i] = rnd.choice([0x00, 0xFF, 0x80, 0x01])
    elif choice == 5:  # truncation
        body = body[: rnd.randint(0, len(body))]
    elif choice == 6:  # garbage tail
        body += rnd.randbytes(rnd.randint(1, 32))
    else:  # header version bump (random versions, served or not)
        if len(body) >= 4:
            struct.pack_into(">h", body, 2, rnd.randint(-1, 20))
    return _SIZE.pack(len(body)) + bytes(body)


def with_correlation(frame: bytes, correlation_id: int) -> bytes:
    if len(frame) >= 12:
        return frame[:8] + struct.pack(">i", correlation_id) + frame[12:]
    return frame


# -- a pipelining fuzz connection ---------------------------------------------------------------
class OrderViolation(AssertionError):
    pass


class FuzzConnection:
    """Sends frames, reads whatever comes back, and checks correlation order. A closed
    connection is an acceptable answer to a bad frame: it reconnects."""

    def __init__(self, address: tuple[str, int], answer_timeout: float = 2.0) -> None:
        self.address = address
        self.answer_timeout = answer_timeout
        self.closes = 0
        self.responses = 0
        self.slow_closes = 0
        self._next_id = 1
        self._sock: socket.socket | None = None
        self._pending: list[int] = []
        self._rbuf = bytearray()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection(self.address, timeout=self.answer_timeout)
            self._pending = []
            self._rbuf = bytearray()
        return self._sock

    def reset(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None

    def send_batch(self, frames: list[bytes]) -> int:
        """Send ``frames`` pipelined and read until each is answered. When the broker
        closes the connection (its answer to a bad frame), the first unanswered frame
        is taken as the culprit and the rest are sent again on a new connection.
        Returns how many frames the broker dealt with (answered or closed on)."""
        dealt = 0
        while frames:
            sock = self._connect()
            ids = []
            out = []
            for frame in frames:
                cid = self._next_id
                self._next_id = (self._next_id + 1) % 0x7FFFFFFF or 1
                out.append(with_correlation(frame, cid))
                ids.append(cid)
            self._pending = [cid for cid, f in zip(ids, frames, strict=True) if len(f) >= 12]
            try:
                sock.sendall(b"".join(out))
                self._read_answers(sock)
                return dealt + len(frames)
            except (ConnectionError, BrokenPipeError):
                self.closes += 1
            except TimeoutError:
                # a long-waiting request (a fetch long-poll, a join) or an acks=0 produce:
                # not a fault; start over on a fresh connection
                self.slow_closes += 1
            self.reset()
            answered = ids.index(self._pending[0]) if self._pending else len(frames)
            dealt += answered + 1
            frames = frames[answered + 1 :]
        return dealt

    def _read_answers(self, sock: socket.socket) -> None:
        while self._pending:
            while len(self._rbuf) < 4 or len(self._rbuf) < 4 + _SIZE.unpack_from(self._rbuf)[0]:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionResetError
                self._rbuf += chunk
            size = _SIZE.unpack_from(self._rbuf)[0]
            frame = bytes(self._rbuf[4 : 4 + size])
            del self._rbuf[: 4 + size]
            (cid,) = struct.unpack_from(">i", frame)
            # requests without an answer (acks=0) drop out of the pending list
            if cid not in self._pending:
                raise OrderViolation(f"response with correlation id {cid}, none pending")
            while self._pending[0] != cid:
                self._pending.pop(0)
            self._pending.pop(0)
            self.responses += 1


# -- the canary ---------------------------------------------------------------------------------
class Canary(threading.Thread):
    """Produces one acks=all record at a time to its own topic, measuring each round trip."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.interval = interval
        self.latencies: list[float] = []
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.errors: list[str] = []
        self.stalls: list[str] = []  # wall-clock time and length of round trips over 0.5 s
        self._halt = threading.Event()

    def run(self) -> None:
        n = 0
        with WireClient(self.bootstrap, client_id="canary", timeout=30) as client:
            while not self._halt.is_set():
                value = f"canary-{n}".encode()
                request = produce_rq.ProduceRequest(
                    transactional_id=None,
                    acks=-1,
                    timeout=datetime.timedelta(seconds=30),
                    topic_data=(
                        produce_rq.TopicProduceData(
                            name=self.topic,
                            partition_data=(
                                produce_rq.PartitionProduceData(
                                    index=0,
                                    records=bytes(
                                        build_batch([(None, value, None, int(time.time() * 1000))])
                                    ),
                                ),
                            ),
                        ),
                    ),
                )
                start = time.perf_counter()
                started_at = time.time()
                try:
                    resp = client.request(request)
                except Exception as exc:
                    self.errors.append(repr(exc))
                    return
                took = time.perf_counter() - start
                self.latencies.append(took)
                if took > 0.5:
                    self.stalls.append(f"{_wall(started_at)} +{took * 1000:.0f} ms")
                part = resp.responses[0].partition_responses[0]
                if part.error_code != ErrorCode.none:
                    self.errors.append(f"produce error {part.error_code!r}")
                else:
                    self.acked[part.base_offset] = value
                n += 1
                self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(60)

    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[int(len(ordered) * 0.99)] if ordered else float("inf")


def _wall(t: float) -> str:
    """A wall-clock time to the millisecond (UTC), to match against the broker log."""
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}"


class CanaryProcess:
    """A ``Canary`` in a process of its own: the fuzzer's Hypothesis generation and its
    garbage collections (in the test's interpreter) cannot stall it, so its stalls are
    the broker's."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.02) -> None:
        mp = multiprocessing.get_context("fork")
        self._halt = mp.Event()
        self._out: multiprocessing.Queue[Any] = mp.Queue()
        self._proc = mp.Process(
            target=_run_canary,
            args=(bootstrap, topic, interval, self._halt, self._out),
            daemon=True,
        )
        self.latencies: list[float] = []
        self.acked: dict[int, bytes] = {}
        self.errors: list[str] = []
        self.stalls: list[str] = []

    def start(self) -> None:
        self._proc.start()

    def stop(self) -> None:
        self._halt.set()
        self.latencies, self.acked, self.errors, self.stalls = self._out.get(timeout=120)
        self._proc.join(30)

    def p99(self) -> float:
        return self.quantile(0.99)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[int(len(ordered) * q)] if ordered else float("inf")


def _run_canary(
    bootstrap: str,
    topic: str,
    interval: float,
    halt: multiprocessing.synchronize.Event,
    out: multiprocessing.Queue[Any],
) -> None:
    canary = Canary(bootstrap, topic, interval)
    canary.start()
    halt.wait()
    canary.stop()
    out.put((canary.latencies, canary.acked, canary.errors, canary.stalls))


def read_topic(bootstrap: str, topic: str, upto: int) -> dict[int, bytes]:
    """Every record of partition 0 below offset ``upto``: offset -> value."""
    found: dict[int, bytes] = {}
    offset = 0
    with WireClient(bootstrap) as client:
        while offset < upto:
            resp = client.request(
                fetch_rq.FetchRequest(
                    replica_id=-1,
                    max_wait=datetime.timedelta(milliseconds=100),
                    min_bytes=1,
                    max_bytes=1 << 24,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=(
                        fetch_rq.FetchTopic(
                            topic=topic,
                            partitions=(
                                fetch_rq.FetchPartition(
                                    partition=0,
                                    current_leader_epoch=-1,
                                    fetch_offset=offset,
                                    last_fetched_epoch=-1,
                                    log_start_offset=-1,
                                    partition_max_bytes=1 << 24,
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                    rack_id="",
                )
            )
            records = resp.responses[0].partitions[0].records
            if not records:
                break
            for record in iter_records(records):
                found[record.offset] = record.value
                offset = record.offset + 1
    return found


Mutator = Callable[[bytes, random.Random], bytes]
