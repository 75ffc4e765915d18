"""Fetch handler micro-benchmark: CPU time per Fetch of the handler plus response
encoding, in process, without sockets or a client, so two source trees (PYTHONPATH) or
two Fetch versions (by name up to v12, by topic id from v13) compare on the hot path.

One topic of 3 partitions holds 300 batches of 16 x 1 KB records. ``--offset 0`` reads
1 MB per partition; ``--offset 1600`` (the end) measures the per-request overhead alone.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oncelog.broker.apis.fetch import fetch  # noqa: E402
from oncelog.broker.broker import Broker  # noqa: E402
from oncelog.broker.config import BrokerConfig  # noqa: E402
from oncelog.broker.partition_writer import PartitionData  # noqa: E402
from oncelog.broker.request import RequestContext  # noqa: E402
from oncelog.protocol.messages import RequestHeader, encode_response  # noqa: E402
from oncelog.protocol.response_frame import EncodesItself  # noqa: E402
from oncelog.records.builder import build_batch  # noqa: E402

PARTITIONS = 3


def filled_broker(data_dir: str) -> tuple[Broker, Any]:
    broker = Broker(BrokerConfig.build(overrides={"log.dirs": data_dir}), listen=("127.0.0.1", 0))
    broker.topics.load()
    topic = broker.topics.create("bench", PARTITIONS, {})
    now = int(time.time() * 1000)
    for i in range(300):
        batch = build_batch([(None, b"x" * 1024, None, now)] * 16)
        broker.writer.append(
            [PartitionData("bench", i % PARTITIONS, batch)],
            acks=1,
            produce_version=9,
            transactional_id=None,
        )
    return broker, topic


def request(version: int, topic: Any, offset: int) -> Any:
    mod = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    named = {"topic_id": topic.topic_id} if version >= 13 else {"topic": topic.name}
    return mod.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=3 << 20,
        session_id=0,
        session_epoch=-1,
        topics=(
            mod.FetchTopic(
                partitions=tuple(
                    mod.FetchPartition(
                        partition=p, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                    for p in range(PARTITIONS)
                ),
                **named,
            ),
        ),
        forgotten_topics_data=(),
    )


async def cpu_us_per_fetch(broker: Broker, version: int, req: Any, count: int) -> float:
    ctx = RequestContext(broker, RequestHeader(1, version, 1, "bench"), 1, "bench")
    start = time.process_time()
    for _ in range(count):
        answer = await fetch(ctx, req)
        if isinstance(answer, EncodesItself):  # headers around file ranges (sendfile)
            answer.frame(1).close()
        else:
            encode_response(1, version, 1, answer)
    return (time.process_time() - start) / count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("versions", nargs="*", type=int, default=[12, 16])
    ap.add_argument("--offset", type=int, default=1600)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker, topic = filled_broker(tmp)
        for version in args.versions:
            req = request(version, topic, args.offset)
            asyncio.run(cpu_us_per_fetch(broker, version, req, args.count // 10))  # warm up
            runs = [
                asyncio.run(cpu_us_per_fetch(broker, version, req, args.count))
                for _ in range(args.rounds)
            ]
            print(
                f"Fetch v{version} at offset {args.offset}: median "
                f"{statistics.median(runs):.1f} us CPU per request (min {min(runs):.1f})"
            )
        broker.topics.close()


if __name__ == "__main__":
    main()
