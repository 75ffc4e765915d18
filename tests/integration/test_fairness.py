"""Fair service: one client pipelining 20,000 requests and 50 clients that never read
their responses cannot starve a canary producer on another connection."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .protocol_fuzz import Canary, encode, read_topic

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

PIPELINED = 20_000
NON_READERS = 50
PER_NON_READER = 2_000
# The fairness goal (a canary's p99 under 50 ms) is met on the shared 2-core test machine even at a load average
# of 10-12 (33-51 ms measured; before the turn scheduler and the encoded ApiVersions
# answer: 131-139 ms). Other suites running at the same time steal the canary's CPU, so
# the default bound leaves a margin (ONCELOG_FAIRNESS_P99_MS=50 asserts the goal itself);
# the measured figure is printed.
P99_BOUND_MS = float(os.environ.get("ONCELOG_FAIRNESS_P99_MS", "100"))


def _frames(n: int) -> bytes:
    """The fairness load: ApiVersions requests, cheap to serve, so the test measures the
    scheduling and not the cost of the requests themselves."""
    api_versions = ApiVersionsRequest(client_software_name="pipe", client_software_version="1")
    return encode(api_versions, 1) * n


def _read_responses(sock: socket.socket, count: int, got: list[int]) -> None:
    buf = bytearray()
    while got[0] < count:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return
        buf += chunk
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + size:
                break
            pos += 4 + size
            got[0] += 1
        del buf[:pos]


def test_pipelining_and_non_reading_clients_do_not_starve_a_producer(
    broker: EmbeddedBroker,
) -> None:
    topic = f"canary-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    address = ("127.0.0.1", broker.port)
    canary = Canary(broker.bootstrap, topic, interval=0.005)
    canary.start()
    time.sleep(0.5)  # a baseline before the load

    # 50 connections that pipeline 2,000 requests each and never read a response
    silent = [socket.create_connection(address) for _ in range(NON_READERS)]
    silent_frames = _frames(PER_NON_READER)
    for s in silent:
        s.setblocking(False)
        try:
            s.send(silent_frames)  # as much as the socket takes; the rest is never sent
        except BlockingIOError:
            pass

    # one connection pipelining 20,000 requests at once, read by another thread
    pipe = socket.create_connection(address)
    got = [0]
    reader = threading.Thread(target=_read_responses, args=(pipe, PIPELINED, got), daemon=True)
    reader.start()
    started = time.monotonic()
    pipe.sendall(_frames(PIPELINED))
    reader.join(120)
    pipelined_s = time.monotonic() - started
    time.sleep(0.5)
    canary.stop()
    for s in silent:
        s.close()
    pipe.close()

    assert got[0] == PIPELINED
    assert not canary.errors, canary.errors
    during = canary.latencies[50:]  # round trips overlapping the load
    p50_ms = sorted(during)[len(during) // 2] * 1000
    p99_ms = sorted(during)[int(len(during) * 0.99)] * 1000
    print(
        f"\nfairness: {PIPELINED} pipelined requests answered in {pipelined_s:.1f} s; canary "
        f"{len(canary.latencies)} produces, p50 {p50_ms:.1f} ms, p99 {p99_ms:.1f} ms "
        f"(goal 50 ms, asserted {P99_BOUND_MS:.0f} ms), max {max(canary.latencies) * 1000:.1f} ms"
    )
    assert p99_ms <= P99_BOUND_MS
    found = read_topic(broker.bootstrap, topic, max(canary.acked) + 1)
    assert found == canary.acked  # nothing lost


def _ping_while(broker: EmbeddedBroker, action: Callable[[], None]) -> float:
    """The slowest ApiVersions round trip on another connection while ``action`` runs."""
    worst = [0.0]
    done = threading.Event()

    def ping() -> None:
        with WireClient(broker.bootstrap) as c:
            request = ApiVersionsRequest(client_software_name="ping", client_software_version="1")
            while not done.is_set():
                start = time.perf_counter()
                c.request(request)
                worst[0] = max(worst[0], time.perf_counter() - start)
                time.sleep(0.01)

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    time.sleep(0.3)
    try:
        action()
    finally:
        time.sleep(0.3)
        done.set()
        pinger.join(10)
    return worst[0]


def test_creating_and_deleting_thousands_of_partitions_does_not_hold_the_loop(
    broker: EmbeddedBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"wide-{uuid.uuid4().hex[:8]}"
    created = _ping_while(
        broker, lambda: admin.create_topics([NewTopic(name, 2000, 1)])[name].result(60)
    )
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2000
    deleted = _ping_while(
        broker, lambda: admin.delete_topics([name], operation_timeout=60)[name].result(60)
    )
    assert name not in admin.list_topics(timeout=10).topics
    assert not list((broker.data_dir).glob(f"{name}-*"))
    print(f"\nwide topic: worst ping {created * 1000:.0f} ms during create, "
          f"{deleted * 1000:.0f} ms during delete")  # fmt: skip
    assert created <= 0.5 and deleted <= 0.5  # before: 1.8 s and 2.7 s


def test_adding_thousands_of_partitions_does_not_hold_the_loop(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = f"grow-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    grown = _ping_while(
        broker,
        lambda: admin.create_partitions([NewPartitions(name, 2001)])[name].result(60),
    )
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2001
    assert len(list(broker.data_dir.glob(f"{name}-*"))) == 2001
    print(f"\nadding 2,000 partitions: worst ping {grown * 1000:.0f} ms")
    assert grown <= 0.5  # before: the logs opened on the loop (about 1.8 s, as a create)
    broker.restart()  # the grown partition count is durable
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2001


def test_auto_creating_hundreds_of_topics_writes_the_metadata_once(
    broker: EmbeddedBroker,
) -> None:
    from kio.schema.metadata.v12 import request as md

    names = [f"auto-{i}-{uuid.uuid4().hex[:6]}" for i in range(400)]
    request = md.MetadataRequest(
        topics=tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    held = _ping_while(broker, lambda: _request(broker, request))
    print(f"\nauto-create of 400 topics: worst ping {held * 1000:.0f} ms")
    assert held <= 1.0
    broker.restart()  # the one metadata write made every topic durable
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert set(names) <= set(admin.list_topics(timeout=10).topics)


def _request(broker: EmbeddedBroker, request: object) -> None:
    with WireClient(broker.bootstrap) as c:
        response = c.request(request)
        assert all(t.error_code == 0 for t in response.topics)
