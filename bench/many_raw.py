"""Many idempotent producers on many partitions, with a client light enough to measure the
broker (the goal: 200 concurrent idempotent producers on 200 partitions).

compare.py's many-* workloads run 200 librdkafka producers in four Python processes; on
this 2-core machine those clients take nearly all the CPU (the broker got ~11% of it in a
sampled run, at a load average of 70), so they measure the clients. Here one process
drives ``--connections`` sockets, each an idempotent producer (its own InitProducerId)
writing to its own partition: prebuilt Produce v10 frames of ``--records`` 1 KB records,
only the sequence and the CRC patched per send, acks=all, ``--inflight`` requests in
flight per connection. Every response is checked for its error code.

Each round runs the same client against 3 connections (the 3-partition reference) and
against ``--connections``, flat out for ``--seconds``, then at half of that connection
count's own flat-out rate for latency (send to response, per request). Rounds alternate
the order. Prints MB/s, broker CPU-s/GB, and request latency p50/p99 at half load.

    python bench/many_raw.py --connections 200 --records 64 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import selectors
import socket
import statistics
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v10 import request as pr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce import cpu_seconds  # noqa: E402

from oncelog.client.wire import WireClient, encode_request  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402
from oncelog.records.batch import CRC_START, OFFSET_CRC  # noqa: E402
from oncelog.records.builder import build_batch  # noqa: E402

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_SEQ_AT = 53  # baseSequence within a v2 batch
RECORD = 1024


@dataclass
class Conn:
    sock: socket.socket
    frame: bytearray
    batch_at: int
    batch_len: int
    records: int
    seq: int = 0
    sent_at: list[float] = field(default_factory=list)  # per request in flight, in order
    inbuf: bytearray = field(default_factory=bytearray)
    out: memoryview | None = None  # the rest of a frame the socket did not take at once
    next_due: float = 0.0


def _producer_frames(bootstrap: str, topic: str, n: int, records: int) -> list[Conn]:
    t = datetime.timedelta(seconds=30)
    conns = []
    payload = os.urandom(RECORD)
    now = int(time.time() * 1000)
    host, _, port = bootstrap.rpartition(":")
    for p in range(n):
        with WireClient(bootstrap) as c:
            producer = c.request(
                ip.InitProducerIdRequest(
                    transactional_id=None, transaction_timeout=t, producer_id=-1, producer_epoch=-1
                )
            )
        batch = build_batch(
            [(None, payload, None, now)] * records,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=0,
        )
        req = pr.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=t,
            topic_data=(
                pr.TopicProduceData(
                    name=topic, partition_data=(pr.PartitionProduceData(index=p, records=batch),)
                ),
            ),
        )
        frame = bytearray(encode_request(req, 0, "many-raw"))
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conns.append(Conn(sock, frame, frame.find(batch), len(batch), records))
    return conns


def _error_code(frame: bytes) -> int:
    """ProduceResponse v10 (non-flexible), after the size: correlation id, topics[1]:
    name, partitions[1]: index, error_code."""
    name_len = int.from_bytes(frame[12:14], "big")
    at = 14 + name_len + 4 + 4
    return int.from_bytes(frame[at : at + 2], "big", signed=True)


def drive(conns: list[Conn], seconds: float, rate: float, inflight: int) -> dict[str, float]:
    """Send for ``seconds`` (``rate`` bytes/s in all, 0: flat out); then wait for the rest."""
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    per_conn_gap = (conns[0].batch_len * len(conns) / rate) if rate else 0.0
    start = time.perf_counter()
    for i, c in enumerate(conns):  # spread the first sends over one gap
        c.next_due = start + per_conn_gap * i / len(conns)
    end = start + seconds
    sent_bytes = acked_bytes = 0
    latencies: list[float] = []
    errors = 0

    def send(c: Conn, now: float) -> None:
        nonlocal sent_bytes
        f, at = c.frame, c.batch_at
        _I32.pack_into(f, at + _SEQ_AT, c.seq)
        c.seq += c.records
        view = memoryview(f)
        _U32.pack_into(f, at + OFFSET_CRC, crc32c.crc32c(view[at + CRC_START : at + c.batch_len]))
        try:
            n = c.sock.send(view)
        except BlockingIOError:
            n = 0
        c.out = view[n:] if n < len(view) else None
        if c.out is not None:
            sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
        c.sent_at.append(now)
        sent_bytes += c.batch_len
        c.next_due += per_conn_gap

    while True:
        now = time.perf_counter()
        sending = now < end
        if not sending and not any(c.sent_at for c in conns):
            break
        if sending:
            for c in conns:
                if c.out is None and len(c.sent_at) < inflight and (not rate or c.next_due <= now):
                    send(c, now)
        timeout = 0.0005 if rate and sending else 0.05
        for key, events in sel.select(timeout):
            c = key.data
            if events & selectors.EVENT_WRITE and c.out is not None:
                try:
                    n = c.sock.send(c.out)
                except BlockingIOError:
                    n = 0
                c.out = c.out[n:] if n < len(c.out) else None
                if c.out is None:
                    sel.modify(c.sock, selectors.EVENT_READ, c)
            if events & selectors.EVENT_READ:
                data = c.sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("the broker closed a producer's connection")
                c.inbuf += data
                while len(c.inbuf) >= 4:
                    size = int.from_bytes(c.inbuf[:4], "big")
                    if len(c.inbuf) < 4 + size:
                        break
                    frame = bytes(c.inbuf[: 4 + size])
                    del c.inbuf[: 4 + size]
                    t0 = c.sent_at.pop(0)
                    if code := _error_code(frame):
                        if not errors:
                            print(f"first error: code {code}", file=sys.stderr)
                        errors += 1
                    else:
                        acked_bytes += c.batch_len
                        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - start
    sel.close()
    latencies.sort()
    return {
        "mb_s": acked_bytes / elapsed / 1e6,
        "errors": errors,
        "p50_ms": latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99)] if latencies else float("nan"),
        "elapsed": elapsed,
    }


def measure(
    broker: EmbeddedBroker, topic: str, n: int, records: int, seconds: float, inflight: int
) -> dict[str, float]:
    assert broker.proc is not None
    pid = broker.proc.pid
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, n, 1)])[topic].result(60)
    conns = _producer_frames(broker.bootstrap, topic, n, records)
    try:
        cpu0, t0 = cpu_seconds(pid), time.process_time()
        flat = drive(conns, seconds, 0.0, inflight)
        cpu = cpu_seconds(pid) - cpu0
        client_cpu = time.process_time() - t0
        gb = flat["mb_s"] * flat["elapsed"] / 1000
        half = drive(conns, seconds, flat["mb_s"] * 1e6 / 2, inflight)
    finally:
        for c in conns:
            c.sock.close()
    return {
        "mb_s": flat["mb_s"],
        "cpu_s_per_gb": cpu / gb if gb else float("nan"),
        "client_cpu_s_per_gb": client_cpu / gb if gb else float("nan"),
        "errors": flat["errors"] + half["errors"],
        "half_mb_s": half["mb_s"],
        "half_p50_ms": half["p50_ms"],
        "half_p99_ms": half["p99_ms"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--records", type=int, default=64, help="1 KB records per batch")
    ap.add_argument("--inflight", type=int, default=5, help="requests in flight per connection")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], help="broker config key=value")
    args = ap.parse_args()
    settings = dict(s.split("=", 1) for s in args.set)
    results: dict[int, list[dict[str, float]]] = {3: [], args.connections: []}
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedBroker(Path(tmp) / "data", settings=settings, log_level="INFO").start()
        try:
            for r in range(args.rounds):
                order = [3, args.connections] if r % 2 == 0 else [args.connections, 3]
                for n in order:
                    got = measure(
                        broker, f"many-{n}-{r}", n, args.records, args.seconds, args.inflight
                    )
                    results[n].append(got)
                    print(f"round {r + 1}, {n} producers: " + ", ".join(
                        f"{k} {v:.2f}" for k, v in got.items()
                    ), flush=True)  # fmt: skip
        finally:
            broker.stop()
            # The broker's own view: event-loop stalls (with the stack that held the loop)
            # and its shutdown summary of loop lag and garbage collections.
            in_report = False
            for line in broker.log_path.read_text().splitlines():
                if "event loop" in line or "held the event loop" in line:
                    print(line)
                    in_report = line.endswith("the loop thread is at:")
                elif in_report and not line[:4].isdigit():
                    print(line)  # the stall report's stack and kernel wait
                else:
                    in_report = False
    print(
        f"\n{args.records} x 1 KB records per batch, {args.inflight} in flight per connection, "
        f"{args.seconds:.0f} s per phase, medians of {args.rounds} rounds [min-max]"
    )
    for n, runs in results.items():
        cells = []
        for key in ("mb_s", "cpu_s_per_gb", "client_cpu_s_per_gb", "half_p50_ms", "half_p99_ms"):
            vals = [x[key] for x in runs]
            cells.append(f"{key} {statistics.median(vals):.2f} [{min(vals):.2f}-{max(vals):.2f}]")
        print(
            f"{n:>4} producers: "
            + ", ".join(cells)
            + f", errors {sum(x['errors'] for x in runs):.0f}"
        )
    many = statistics.median(x["mb_s"] for x in results[args.connections])
    three = statistics.median(x["mb_s"] for x in results[3])
    print(f"{args.connections}-partition / 3-partition MB/s: {many / three:.2f}")


if __name__ == "__main__":
    main()
