"""Protocol fuzzing against a real broker subprocess, judged by a canary client.

Oracles: the broker never exits; its log holds no traceback and no BUG line; every
response comes in request order; the canary's acks=all produce never stalls over
1 s; after a restart every acknowledged canary record is still there.

CI runs about 2 minutes; the ``slow``-marked soak (``make test-slow``) runs 30.
ONCELOG_FUZZ_SECONDS overrides either.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .protocol_fuzz import (
    API_VERSIONS_V0,
    Canary,
    FuzzConnection,
    mutate,
    read_topic,
    request_frames,
)

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

MUTANTS_PER_FRAME = 24


def _storm(address: tuple[str, int], rnd: random.Random) -> None:
    """Many short connections: half-sent frames, announced huge frames, slow drips."""
    socks = []
    for _ in range(rnd.randint(20, 200)):
        try:
            s = socket.create_connection(address, timeout=2)
        except OSError:
            break
        socks.append(s)
        kind = rnd.randrange(3)
        try:
            if kind == 0:
                s.sendall(struct.pack(">i", rnd.randint(1, 100 * 1024 * 1024)) + b"\x00\x12")
            elif kind == 1:
                for b in API_VERSIONS_V0[:7]:
                    s.sendall(bytes([b]))
        except OSError:
            pass  # the broker may close a connection whose size it refuses
    for s in socks:
        s.close()


def run_fuzz(tmp_path: Path, seconds: float) -> dict[str, int]:
    broker = EmbeddedBroker(tmp_path / "data", log_level="INFO").start()
    try:
        return _fuzz(broker, seconds)
    finally:
        broker.stop()


def _fuzz(broker: EmbeddedBroker, seconds: float) -> dict[str, int]:
    topic = f"canary-{uuid.uuid4().hex}"
    create_topic(broker.bootstrap, topic)
    address = ("127.0.0.1", broker.port)
    canary = Canary(broker.bootstrap, topic)
    canary.start()
    conn = FuzzConnection(address)
    rnd = random.Random(int(os.environ.get("ONCELOG_FUZZ_SEED", "0")) or None)
    corpus: list[bytes] = [API_VERSIONS_V0]
    stats = {"frames": 0, "examples": 0, "storms": 0}
    deadline = time.monotonic() + seconds

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def fuzz_step(data: st.DataObject) -> None:
        frames = data.draw(st.lists(request_frames(), min_size=1, max_size=8))
        corpus.extend(frames)
        while len(corpus) > 500:
            corpus.pop(rnd.randrange(len(corpus)))
        batch = frames + [mutate(rnd.choice(corpus), rnd) for _ in range(MUTANTS_PER_FRAME)]
        rnd.shuffle(batch)
        stats["frames"] += conn.send_batch(batch)
        stats["examples"] += 1
        if stats["examples"] % 400 == 0:
            _storm(address, rnd)
            stats["storms"] += 1
        assert broker.proc is not None and broker.proc.poll() is None, "the broker exited"

    try:
        while time.monotonic() < deadline:
            fuzz_step()  # 100 fresh examples per call
    finally:
        conn.reset()
        canary.stop()
        exit_code = broker.stop()
    stats["responses"] = conn.responses
    stats["closes"] = conn.closes
    stats["slow_closes"] = conn.slow_closes
    stats["canary_records"] = len(canary.acked)
    stats["canary_p99_ms"] = int(canary.p99() * 1000)
    stats["canary_max_ms"] = int(max(canary.latencies) * 1000)
    print(f"\nprotocol fuzz: {stats}")
    log_text = broker.log_path.read_text()
    assert exit_code == 0, broker.tail_log()
    assert "Traceback" not in log_text and "BUG:" not in log_text, _first_bug(log_text)
    assert not canary.errors, canary.errors
    held = [line for line in log_text.splitlines() if "held the event loop" in line]
    assert canary.latencies and max(canary.latencies) <= 1.0, (canary.stalls, held)
    broker.start()
    try:
        found = read_topic(broker.bootstrap, topic, max(canary.acked) + 1)
    finally:
        broker.stop()
    assert found == canary.acked
    return stats


def _first_bug(log_text: str) -> str:
    """Each distinct fault once: the BUG line's API and version, the exception, and
    the innermost oncelog frame."""
    lines = log_text.splitlines()
    found: dict[str, int] = {}
    for i, line in enumerate(lines):
        if "BUG:" not in line and "Traceback" not in line:
            continue
        where = line.split("BUG: ", 1)[-1].split(" on connection")[0]
        frames = [x.strip() for x in lines[i + 1 : i + 60] if "oncelog/" in x]
        j = i + 1
        while j < len(lines) and (
            lines[j].startswith((" ", "Traceback")) or not lines[j][:4].isdigit()
        ):
            j += 1
        key = f"{where} | {lines[j - 1].strip()} | {frames[-1] if frames else ''}"
        found[key] = found.get(key, 0) + 1
    return "\n".join(f"{n}x {key}" for key, n in found.items())


def _seconds(default: float) -> float:
    return float(os.environ.get("ONCELOG_FUZZ_SECONDS", default))


@pytest.mark.timeout(_seconds(120) + 300)
def test_protocol_fuzz(tmp_path: Path) -> None:
    stats = run_fuzz(tmp_path, _seconds(120))
    assert stats["frames"] > 1000 and stats["responses"] > 100


@pytest.mark.slow
@pytest.mark.timeout(_seconds(1800) + 300)
def test_protocol_fuzz_long(tmp_path: Path) -> None:
    stats = run_fuzz(tmp_path, _seconds(1800))
    assert stats["frames"] > 100_000
