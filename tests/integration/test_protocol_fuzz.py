"""Protocol fuzzing against a real broker subprocess, judged by a canary client.

Oracles: the broker never exits; its log holds no traceback and no BUG line; every
response comes in request order; the canary's acks=all produce never stalls over
1 s; after a restart every acknowledged canary record is still there.

CI runs about 2 minutes; the ``slow``-marked soak (``make test-slow``) runs 30.
ONCELOG_FUZZ_SECONDS overrides either. The figures (frames, frames/s, canary p50/p99/max,
connections the broker closed, tracebacks and BUG lines, broker log size) are printed
and, with ONCELOG_FUZZ_SUMMARY=path, written there as JSON.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import os
import queue
import random
import socket
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .protocol_fuzz import (
    API_VERSIONS_V0,
    CanaryProcess,
    FuzzConnection,
    mutate,
    read_topic,
    request_frames,
)

# xdist (make test): timing-sensitive (latency, RSS or deadline bounds under chaos), so
# never run alongside another test of this group.
pytestmark = pytest.mark.xdist_group("timing")

MUTANTS_PER_FRAME = 24
# Processes pipelining mutants of the generated pool, and connections in each. 2 x 4 gave
# 533-706 frames/s (canary max 0.5-0.6 s) at a load average of 10-13 on the shared 2-core
# machine; at 20-57 the canary stalled over 1 s with 1 x 3 as with 2 x 4.
WORKERS = int(os.environ.get("ONCELOG_FUZZ_WORKERS", "2"))
THREADS = int(os.environ.get("ONCELOG_FUZZ_THREADS", "4"))
WORKER_BATCH = 64


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


def run_fuzz(tmp_path: Path, seconds: float) -> dict[str, Any]:
    broker = EmbeddedBroker(tmp_path / "data", log_level="INFO").start()
    try:
        return _fuzz(broker, seconds)
    finally:
        broker.stop()


def _mutating_worker(
    address: tuple[str, int],
    seed: int,
    pool: list[bytes],
    fresh: multiprocessing.Queue[bytes],
    halt: multiprocessing.synchronize.Event,
    results: multiprocessing.Queue[tuple[str, int, int, int, int]],
) -> None:
    """A worker process: ``THREADS`` connections pipeline byte mutants and replays of the
    generated pool (which ``fresh`` keeps feeding) until ``halt``. A mutant often makes
    the broker close the connection, so each connection mostly waits on round trips:
    threads overlap them."""
    outcomes: list[tuple[str, int, int, int, int]] = []

    def run(rnd: random.Random) -> None:
        conn = FuzzConnection(address)
        frames = 0
        outcome = "ok"
        try:
            while not halt.is_set():
                try:
                    while True:
                        pool[rnd.randrange(len(pool))] = fresh.get_nowait()
                except queue.Empty:
                    pass
                batch = [mutate(rnd.choice(pool), rnd) for _ in range(WORKER_BATCH)]
                batch[:: WORKER_BATCH // 4] = rnd.choices(pool, k=4)  # replays
                frames += conn.send_batch(batch)
        except BaseException as exc:  # an oracle failure (OrderViolation) or a crash
            outcome = repr(exc)
            halt.set()
        finally:
            conn.reset()
            outcomes.append((outcome, frames, conn.responses, conn.closes, conn.slow_closes))

    seeds = random.Random(seed)
    threads = [
        threading.Thread(target=run, args=(random.Random(seeds.random()),)) for _ in range(THREADS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [o for o in outcomes if o[0] != "ok"]
    results.put(
        (
            failed[0][0] if failed else "ok",
            *(sum(o[i] for o in outcomes) for i in range(1, 5)),  # type: ignore[misc]
        )
    )


def _fuzz(broker: EmbeddedBroker, seconds: float) -> dict[str, Any]:
    """Hypothesis generates frames in this process and sends each fresh one (with a few
    mutants) on its own connection; ``WORKERS`` processes meanwhile pipeline cheap byte
    mutants and replays of the generated pool on theirs. Generation costs tens of ms per
    example, so mutants of a pool it keeps refilling carry most of the volume; processes,
    not threads, so neither they nor Hypothesis take the canary thread's interpreter."""
    topic = f"canary-{uuid.uuid4().hex}"
    create_topic(broker.bootstrap, topic)
    address = ("127.0.0.1", broker.port)
    seed = int(os.environ.get("ONCELOG_FUZZ_SEED", "0")) or random.randrange(1 << 30)
    print(f"\nprotocol fuzz seed {seed} (ONCELOG_FUZZ_SEED)")
    rnd = random.Random(seed)
    stats: dict[str, Any] = {"frames": 0, "examples": 0, "storms": 0}
    conn = FuzzConnection(address)
    # a first pool, so the workers start with generated frames
    pool: list[bytes] = [API_VERSIONS_V0]

    @settings(max_examples=50, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(request_frames())
    def seed_pool(frame: bytes) -> None:
        pool.append(frame)

    seed_pool()
    mp = multiprocessing.get_context("fork")
    halt = mp.Event()
    results: multiprocessing.Queue[tuple[str, int, int, int, int]] = mp.Queue()
    feeds: list[multiprocessing.Queue[bytes]] = [mp.Queue() for _ in range(WORKERS)]
    workers = [
        mp.Process(
            target=_mutating_worker,
            args=(address, rnd.randrange(1 << 30), pool, feed, halt, results),
            daemon=True,
        )
        for feed in feeds
    ]
    for w in workers:
        w.start()
    canary = CanaryProcess(broker.bootstrap, topic)
    canary.start()
    deadline = time.monotonic() + seconds

    @settings(
        max_examples=10,  # the deadline is checked between runs
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def fuzz_step(data: st.DataObject) -> None:
        frames = data.draw(st.lists(request_frames(), min_size=1, max_size=8))
        for frame in frames:
            pool[rnd.randrange(len(pool))] = frame
            for feed in feeds:
                feed.put(frame)
        batch = frames + [mutate(rnd.choice(pool), rnd) for _ in range(MUTANTS_PER_FRAME)]
        rnd.shuffle(batch)
        stats["frames"] += conn.send_batch(batch)
        stats["examples"] += 1
        if stats["examples"] % 400 == 0:  # every minute or two
            _storm(address, rnd)
            stats["storms"] += 1
        assert broker.proc is not None and broker.proc.poll() is None, "the broker exited"

    try:
        while time.monotonic() < deadline and not halt.is_set():
            fuzz_step()
    finally:
        halt.set()
        outcomes = [results.get(timeout=60) for _ in workers]
        for w in workers:
            w.join(30)
        conn.reset()
        canary.stop()
        exit_code = broker.stop()
    failures = [outcome for outcome, *_ in outcomes if outcome != "ok"]
    assert not failures, failures
    stats["frames"] += sum(o[1] for o in outcomes)
    stats["responses"] = conn.responses + sum(o[2] for o in outcomes)
    stats["closes"] = conn.closes + sum(o[3] for o in outcomes)
    stats["slow_closes"] = conn.slow_closes + sum(o[4] for o in outcomes)
    stats["frames_per_s"] = int(stats["frames"] / seconds)
    stats["canary_records"] = len(canary.acked)
    stats["canary_p50_ms"] = int(canary.quantile(0.5) * 1000)
    stats["canary_p99_ms"] = int(canary.p99() * 1000)
    stats["canary_max_ms"] = int(max(canary.latencies) * 1000)
    stats["canary_stalls_over_1s"] = sum(1 for t in canary.latencies if t > 1.0)
    log_text = broker.log_path.read_text()
    stats["broker_log_bytes"] = len(log_text.encode())
    stats["tracebacks"] = log_text.count("Traceback")
    stats["bug_lines"] = log_text.count("BUG:")
    stats["held_loop_lines"] = log_text.count("held the event loop")
    stats["client_faults"] = _client_fault_totals(log_text)
    stats["loop_stalls"] = log_text.count("event loop held for")
    stats["watchdog_reports"] = _watchdog_reports(log_text)
    stats["loop_summary"] = _last_line_with(log_text, "event loop: max lag")
    _report(stats, seconds, canary.stalls)
    assert exit_code == 0, broker.tail_log()
    assert "Traceback" not in log_text and "BUG:" not in log_text, _first_bug(log_text)
    assert not canary.errors, canary.errors
    held = [line for line in log_text.splitlines() if "held the event loop" in line]
    assert canary.latencies and max(canary.latencies) <= 1.0, (
        canary.stalls,
        held,
        _watchdog_reports(log_text),
    )
    # The restart loads every offset commit the fuzzer made: ~954,000 records after a
    # 30-minute soak took 18.5 s (the group coordinator decodes each one before the broker
    # is ready), over EmbeddedBroker's default 20 s. The oracle is what survives, not how
    # fast the load is (docs/perf-notes/startup.md, coordinator loads).
    broker.start(timeout=180)
    try:
        found = read_topic(broker.bootstrap, topic, max(canary.acked) + 1)
    finally:
        broker.stop()
    assert found == canary.acked
    return stats


def _last_line_with(log_text: str, needle: str) -> str:
    lines = [line for line in log_text.splitlines() if needle in line]
    return lines[-1] if lines else ""


def _watchdog_reports(log_text: str) -> list[str]:
    """The broker watchdog's stall reports, each with the stack that held the loop."""
    reports: list[str] = []
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if "event loop held for" in line or "event loop stall over" in line:
            block = [line]
            for nxt in lines[i + 1 : i + 80]:
                if nxt[:4].isdigit():  # the next log record
                    break
                block.append(nxt)
            reports.append("\n".join(block))
    return reports


def _client_fault_totals(log_text: str) -> dict[str, int]:
    """The broker's own counts of client faults (connections it closed on bad bytes,
    invalid requests, refused partitions): the totals of its last summary line."""
    totals: dict[str, int] = {}
    for line in log_text.splitlines():
        if "client faults not logged one by one" in line and "(totals: " in line:
            totals = {}
            for part in line.rsplit("(totals: ", 1)[1].rstrip(")").split(", "):
                n, _, kind = part.partition(" ")
                totals[kind] = int(n)
    return totals


def _report(stats: dict[str, Any], seconds: float, stalls: list[str]) -> None:
    """Print the figures, and write them as JSON to ONCELOG_FUZZ_SUMMARY if set (the
    soak's closing note quotes them)."""
    print(f"\nprotocol fuzz ({seconds:.0f} s): {stats}")
    if stalls:
        print(f"canary round trips over 0.5 s (start, length): {stalls[:50]}")
    for report in stats.get("watchdog_reports", []):
        print(report)
    path = os.environ.get("ONCELOG_FUZZ_SUMMARY")
    if path:
        summary = {"seconds": seconds, **stats, "canary_slow_round_trips": stalls}
        Path(path).write_text(json.dumps(summary, indent=1) + "\n")


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
    # the fuzzing goal is 1,000,000 frames in 30 minutes (556/s); on the shared machine a
    # 10-minute soak reached 121/s under a load average of 30-57
    assert stats["frames"] > 100 * _seconds(1800)
