"""Bounded memory: a size prefix alone reserves nothing big, idle connections hold no
receive buffers, and memory goes back when connections close."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from oncelog.embedded import EmbeddedBroker

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
