"""EndTxn round trip with many transactional producers at once (goal: p99 <= 5 ms).

``--producers`` confluent-kafka transactional producers (50 by default), one thread each,
loop: begin, produce a small record to their own partition, flush, then time
``commit_transaction`` (the EndTxn round trip: the records are already acknowledged).
Prints p50/p99/max over all commits, per source tree given with ``--src`` (brokers
started with ``PYTHONPATH=<src>``, alternating round by round). Prints figures; it is not
a timed test.

    python bench/end_txn_latency.py --src /path/to/base/src --src src --rounds 40

``--py-spy PREFIX`` records each broker with py-spy while the producers run (one speedscope
file per round and tree: ``PREFIX-<round>-<n>.json``; ``--py-spy-native`` adds C frames).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce import cpu_seconds  # noqa: E402
from produce_ab_support import started  # noqa: E402

from oncelog.embedded import EmbeddedBroker  # noqa: E402


def user_sys(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def broker_side(http_url: str | None, api: str = "END_TXN") -> str:
    """The broker's own view (request decoded to response ready) from its latency
    histogram: the bucket bounds holding p50 and p99, and the share within 5 ms."""
    if http_url is None:
        return "no metrics listener"
    text = urllib.request.urlopen(f"{http_url}/metrics", timeout=10).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("oncelog_request_duration_seconds_bucket") and f'api="{api}"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
    if not buckets or buckets[-1][1] == 0:
        return "no samples"
    total = buckets[-1][1]

    def bound(q: float) -> str:
        for le, n in buckets:
            if n >= q * total:
                return f"<= {le * 1000:g} ms"
        return "?"

    within = next((n for le, n in buckets if le == 0.005), 0.0) / total
    return f"p50 {bound(0.5)}, p99 {bound(0.99)}, {100 * within:.1f}% within 5 ms"


def requests_per_txn(http_url: str | None, commits: int) -> str:
    """Requests the broker served per commit, per API (the round's whole load)."""
    if http_url is None or not commits:
        return ""
    text = urllib.request.urlopen(f"{http_url}/metrics", timeout=10).read().decode()
    counts = []
    for line in text.splitlines():
        if line.startswith("oncelog_requests_total{"):
            api = line.split('api="', 1)[1].split('"', 1)[0]
            counts.append((float(line.split()[-1]) / commits, api))
    return ", ".join(f"{api} {n:.2f}" for n, api in sorted(counts, reverse=True) if n >= 0.01)


def py_spy(pid: int, out: str, native: bool) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("py-spy")
    cmd = [str(exe), "record", "-p", str(pid), "-o", out, "-f", "speedscope", "-r", "200"]
    return subprocess.Popen([*cmd, "--native"] if native else cmd)


def run(
    bootstrap: str, producers: int, rounds: int, interval_s: float = 0.0
) -> tuple[list[float], float]:
    """The commit latencies, and the seconds all producers took for all their rounds.
    ``interval_s``: each producer starts a transaction every ``interval_s`` (0: back to
    back); the producers' phases are spread evenly over the interval."""
    topic = "lat"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, producers, 1)])[topic].result(60)
    clients = []
    for i in range(producers):
        p = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"lat-{i}", "linger.ms": 0}
        )
        p.init_transactions(60)
        clients.append(p)
    samples: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(producers)

    def loop(i: int, p: Producer) -> None:
        mine = []
        barrier.wait()
        due = time.perf_counter() + interval_s * i / producers
        for _ in range(rounds):
            if interval_s:
                if (wait := due - time.perf_counter()) > 0:
                    time.sleep(wait)
                due += interval_s
            p.begin_transaction()
            p.produce(topic, b"x" * 100, partition=i)
            p.flush(30)
            t0 = time.perf_counter()
            p.commit_transaction(30)
            mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=loop, args=(i, p)) for i, p in enumerate(clients)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return samples, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", action="append", required=True)
    ap.add_argument("--producers", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=40, help="commits per producer")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--interval-ms",
        type=float,
        default=0.0,
        help="each producer starts a transaction this often (0: back to back, saturation)",
    )
    ap.add_argument("--py-spy", metavar="PREFIX", help="record each broker with py-spy")
    ap.add_argument("--py-spy-native", action="store_true")
    args = ap.parse_args()
    out: dict[str, list[float]] = {s: [] for s in args.src}
    cpu: dict[str, list[float]] = {s: [] for s in args.src}
    for r in range(args.repeat):
        for n, src in enumerate(args.src):
            os.environ["PYTHONPATH"] = str(Path(src).resolve())
            with tempfile.TemporaryDirectory(prefix="oncelog-endtxn-") as tmp:
                broker = EmbeddedBroker(
                    Path(tmp) / "data",
                    log_level="WARNING",
                    settings={"metrics.listener": "http://127.0.0.1:0"},
                )
                with started(broker) as b:
                    assert b.proc is not None
                    spy = None
                    if args.py_spy:
                        out_file = f"{args.py_spy}-{r}-{n}.json"
                        spy = py_spy(b.proc.pid, out_file, args.py_spy_native)
                    load = os.getloadavg()[0]
                    cpu0 = cpu_seconds(b.proc.pid)
                    user0, sys0 = user_sys(b.proc.pid)
                    me0 = resource.getrusage(resource.RUSAGE_SELF)
                    samples, took = run(
                        b.bootstrap, args.producers, args.rounds, args.interval_ms / 1000
                    )
                    me1 = resource.getrusage(resource.RUSAGE_SELF)
                    broker_s = cpu_seconds(b.proc.pid) - cpu0
                    per_txn_ms = broker_s / len(samples) * 1000
                    # The producers' own CPU (librdkafka threads and the Python loops, all in
                    # this process), start-up and init_transactions included.
                    client_s = (me1.ru_utime - me0.ru_utime) + (me1.ru_stime - me0.ru_stime)
                    user1, sys1 = user_sys(b.proc.pid)
                    user_share = (user1 - user0) / max(1e-9, user1 - user0 + sys1 - sys0)
                    load = max(load, os.getloadavg()[0])
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        spy.wait(60)
                    inside = broker_side(b.http_url)
                    mix = requests_per_txn(b.http_url, len(samples))
            out[src].extend(samples)
            cpu[src].append(per_txn_ms)
            print(f"round {r} {src}: p50 {pct(samples, 0.5):.2f} ms p99 {pct(samples, 0.99):.2f} "
                  f"ms over {len(samples)} commits ({len(samples) / took:.0f}/s); broker side: {inside}; broker CPU per "
                  f"transaction {per_txn_ms:.2f} ms ({100 * user_share:.0f}% user), {broker_s / took:.2f} of a core; client CPU per transaction {client_s / len(samples) * 1000:.2f} ms ({client_s / took:.2f} cores); load {load:.1f}; requests per commit: {mix}",
                  flush=True)  # fmt: skip
    pacing = f"one every {args.interval_ms:g} ms each" if args.interval_ms else "back to back"
    print(f"EndTxn round trip, {args.producers} transactional producers ({pacing}), ms")
    for src, samples in out.items():
        print(
            f"  {src:>30}: p50 {pct(samples, 0.5):6.2f}  p99 {pct(samples, 0.99):6.2f}  "
            f"max {max(samples):6.2f}  mean {statistics.fmean(samples):6.2f}  n={len(samples)}  "
            f"broker CPU per transaction {statistics.median(cpu[src]):.3f} ms "
            f"[{min(cpu[src]):.3f}-{max(cpu[src]):.3f}]"
        )


if __name__ == "__main__":
    main()
