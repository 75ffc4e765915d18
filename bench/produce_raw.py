"""Broker CPU-s/GB of the produce path with a near-free client: prebuilt Produce v10 frames.

A confluent-kafka producer in the same 2-core machine takes as much CPU as the broker,
so its noise swamps small differences. This client sends prebuilt ProduceRequest
frames (one ~1 MB idempotent batch per request, 1 KB records, round-robin over the
partitions, as librdkafka sends them) over one socket with ``--inflight`` requests in
flight, patching only the sequence number and the CRC per batch. It checks every
response. For A/B work on the broker's own cost; the figures to quote come from
``produce_ab.py`` (real clients).

    python bench/produce_raw.py --src /path/to/base/src --src src --mb 500 --repeat 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import struct
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import crc32c
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v10 import request as pr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce import cpu_seconds  # noqa: E402
from produce_ab_support import started  # noqa: E402

from oncelog.client.wire import WireClient, encode_request  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402
from oncelog.records.batch import CRC_START, OFFSET_CRC  # noqa: E402
from oncelog.records.builder import build_batch  # noqa: E402

_SEQ_AT = 53  # baseSequence inside the batch
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rpartition(")")[2].split()[7])


def run(bootstrap: str, topic: str, mb: int, records: int, partitions: int, inflight: int,
        pid: int) -> tuple[float, float, float]:  # fmt: skip
    """(MB/s, broker CPU-s/GB, broker minor page faults per MB)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    t = datetime.timedelta(seconds=30)
    with WireClient(bootstrap) as c:
        producer = c.request(
            ip.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=t, producer_id=-1, producer_epoch=-1
            )
        )
        payload = os.urandom(1024)
        now = int(time.time() * 1000)
        batch = build_batch(
            [(None, payload, None, now)] * records,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=0,
        )
        frames = []
        for p in range(partitions):
            req = pr.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=t,
                topic_data=(
                    pr.TopicProduceData(
                        name=topic,
                        partition_data=(pr.PartitionProduceData(index=p, records=batch),),
                    ),
                ),
            )
            frame = bytearray(encode_request(req, 0, "produce-raw"))
            frames.append((frame, frame.find(batch)))
        sock = c.sock
        count = mb * 1_000_000 // len(batch)
        seqs = [0] * partitions
        pending: deque[int] = deque()
        cpu0 = cpu_seconds(pid)
        faults0 = minor_faults(pid)
        start = time.perf_counter()
        for i in range(count + inflight):
            if len(pending) == inflight or i >= count:
                if not pending:
                    break
                resp = c.decode_response(0, 10, c.recv_frame())
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.none, part
                pending.popleft()
                if i >= count:
                    continue
            p = i % partitions
            frame, at = frames[p]
            _I32.pack_into(frame, at + _SEQ_AT, seqs[p])
            seqs[p] += records
            view = memoryview(frame)
            _U32.pack_into(
                frame, at + OFFSET_CRC, crc32c.crc32c(view[at + CRC_START : at + len(batch)])
            )
            del view
            sock.sendall(frame)
            pending.append(i)
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu0
        faults = minor_faults(pid) - faults0
    gb = count * len(batch) / 1e9
    return gb * 1000 / elapsed, cpu / gb, faults / gb / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--src", action="append", required=True)
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--records", type=int, default=950, help="1 KB records per batch")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, list[tuple[float, float, float]]] = {s: [] for s in args.src}
    for r in range(args.repeat):
        for src in args.src:
            os.environ["PYTHONPATH"] = str(Path(src).resolve())
            with tempfile.TemporaryDirectory(prefix="oncelog-raw-") as tmp:
                with started(EmbeddedBroker(Path(tmp) / "data", log_level="WARNING")) as b:
                    assert b.proc is not None
                    res = run(b.bootstrap, f"raw{r}", args.mb, args.records, args.partitions,
                              args.inflight, b.proc.pid)  # fmt: skip
            out[src].append(res)
            print(f"round {r} {src}: {res[0]:.0f} MB/s {res[1]:.3f} CPU-s/GB "
                  f"{res[2]:.0f} page faults/MB", flush=True)  # fmt: skip
    for src, runs in out.items():
        cpu = [c for _, c, _ in runs]
        mbs = [m for m, _, _ in runs]
        print(f"  {src:>30}: CPU-s/GB {statistics.median(cpu):.3f} [{min(cpu):.3f}-{max(cpu):.3f}]"
              f"  MB/s {statistics.median(mbs):.0f} [{min(mbs):.0f}-{max(mbs):.0f}]")  # fmt: skip


if __name__ == "__main__":
    main()
