"""Bounded memory: a size prefix alone reserves nothing big, idle connections hold no
receive buffers, and memory goes back when connections close."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from oncelog.embedded import EmbeddedBroker

from .protocol_fuzz import encode
from .test_bad_input import assert_other_client_works

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

MiB = 1024 * 1024
ANNOUNCERS = 10
IDLE = 1_000
# Stated bound: 10 announced 100 MiB frames (with 64 KiB of each sent) and 1,000 idle
# connections add at most 40 MiB (before: 10 x 100 MiB allocated at the prefix, and
# 256 KiB per connection held for its lifetime).
BOUND_MiB = 40
# After the close, RSS comes back to within this of where it started.
SETTLED_MiB = 16


def rss_mib(broker: EmbeddedBroker) -> float:
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_announced_frames_and_idle_connections_stay_within_bounds(
    broker: EmbeddedBroker,
) -> None:
    address = ("127.0.0.1", broker.port)
    assert_other_client_works(broker)
    time.sleep(0.5)
    start = rss_mib(broker)

    announcers = []
    for _ in range(ANNOUNCERS):
        s = socket.create_connection(address)
        # a Produce header, then 64 KiB of a promised 100 MiB, then silence
        s.sendall(struct.pack(">i", 100 * MiB) + struct.pack(">hhi", 0, 9, 1) + b"\0" * (64 * 1024))
        announcers.append(s)
    idle = [socket.create_connection(address) for _ in range(IDLE)]
    # one byte on each idle connection makes the broker read (and hold a partial prefix)
    for s in idle[: IDLE // 2]:
        s.sendall(b"\0")
    time.sleep(2)
    assert_other_client_works(broker)
    loaded = rss_mib(broker)

    for s in announcers + idle:
        s.close()
    time.sleep(3)
    assert_other_client_works(broker)
    after = rss_mib(broker)
    print(
        f"\nmemory: RSS {start:.0f} MiB at start, {loaded:.0f} MiB with {ANNOUNCERS} announced "
        f"100 MiB frames and {IDLE} idle connections, {after:.0f} MiB after they closed"
    )
    assert loaded - start <= BOUND_MiB
    assert after - start <= SETTLED_MiB


BUDGET_MiB = 8
FRAME_MiB = 20
SENT_MiB = 12


def test_the_request_byte_budget_bounds_frames_still_arriving(tmp_path: Path) -> None:
    """queued.max.request.bytes=8 MiB and 10 connections each sending 12 MiB of a 20 MiB
    request: the buffers of the frames still arriving stay within the budget plus one
    frame (before, each grew to 16 MiB: 160 MiB); once the rest comes, every request is
    answered (one connection at a time overdraws, so none waits forever)."""
    broker = EmbeddedBroker(
        tmp_path / "data", settings={"queued.max.request.bytes": str(BUDGET_MiB * MiB)}
    ).start()
    try:
        assert_other_client_works(broker)
        time.sleep(0.5)
        start = rss_mib(broker)
        request = ApiVersionsRequest(
            client_software_name="x" * (FRAME_MiB * MiB), client_software_version="1"
        )
        frame = encode(request, 7)
        measured = threading.Event()
        answered: list[int] = []

        def client() -> None:
            with socket.create_connection(("127.0.0.1", broker.port), timeout=120) as s:
                s.sendall(frame[: SENT_MiB * MiB])  # blocks while the broker reads no more
                measured.wait(120)
                s.sendall(frame[SENT_MiB * MiB :])
                reply = s.recv(8, socket.MSG_WAITALL)
                answered.append(struct.unpack(">ii", reply)[1])

        clients = [threading.Thread(target=client, daemon=True) for _ in range(ANNOUNCERS)]
        for c in clients:
            c.start()
        time.sleep(3)  # as much as the broker takes of the first 12 MiB of each
        assert_other_client_works(broker)
        loaded = rss_mib(broker)
        measured.set()  # now the rest of each frame
        for c in clients:
            c.join(120)
        assert_other_client_works(broker)
        print(
            f"\nbudgeted memory: RSS {start:.0f} MiB at start, {loaded:.0f} MiB with "
            f"{ANNOUNCERS} x {SENT_MiB} MiB of {FRAME_MiB} MiB frames arriving "
            f"(budget {BUDGET_MiB} MiB), all answered: {answered == [7] * ANNOUNCERS}"
        )
        assert answered == [7] * ANNOUNCERS
        assert loaded - start <= BUDGET_MiB + FRAME_MiB + 16
    finally:
        broker.stop()
