"""Cost of a /metrics scrape: a broker with N partitions (default 2,000 in 20 topics), some
with an open transaction and a consumer group's offsets, scraped repeatedly.

Prints the wall time per scrape (median, p90, max), the broker's CPU time per scrape (from
/proc), the response size and sample count; the phases of a scrape measured in process (the
snapshot, the only part on the broker's event loop, then families and text in a thread,
against prometheus_client's own encoder); and the per-request cost of the hot-path
counters (RequestStats.request_done + response_errors on a Produce response).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time
import timeit
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hot_path_cost() -> float:
    """Microseconds per request of the counters dispatch updates."""
    from kio.schema.errors import ErrorCode
    from kio.schema.produce.v9 import response as pr

    from oncelog.broker.request_stats import RequestStats, response_errors

    parts = tuple(
        pr.PartitionProduceResponse(
            index=i,
            error_code=ErrorCode.none,
            base_offset=0,
            log_append_time=None,
            log_start_offset=0,
            record_errors=(),
            error_message=None,
        )
        for i in range(3)
    )
    resp = pr.ProduceResponse(
        responses=(pr.TopicProduceResponse(name="t", partition_responses=parts),),
        throttle_time=datetime.timedelta(0),
    )
    stats = RequestStats()
    n = 200_000

    def once() -> None:
        stats.request_done("PRODUCE", 0.0012, response_errors(resp))
        stats.bytes_in["t"] += 1024

    return timeit.timeit(once, number=n) / n * 1e6


def phases(partitions: int, topics: int, rounds: int = 5) -> None:
    """The scrape's phases in process (median of ``rounds``), on a broker without traffic."""
    import asyncio
    import tempfile

    from prometheus_client.exposition import generate_latest

    from oncelog.broker.broker import Broker
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.metrics import BrokerCollector, encode_text, families, metrics_registry

    async def run() -> None:
        with tempfile.TemporaryDirectory() as d:
            cfg = BrokerConfig.build(None, {"log.dirs": d, "listeners": "PLAINTEXT://127.0.0.1:0"})
            broker = Broker(cfg)
            await broker.start()
            try:
                for i in range(topics):
                    broker.topics.create(f"scrape-{i:02d}", partitions // topics, {})
                collector = BrokerCollector(broker, broker.state_view)
                times: dict[str, list[float]] = {}
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    snap = collector.snapshot()
                    t1 = time.perf_counter()
                    fams = list(families(snap))
                    t2 = time.perf_counter()
                    encode_text(fams)
                    t3 = time.perf_counter()
                    generate_latest(metrics_registry(snap))
                    t4 = time.perf_counter()
                    for k, v in (
                        ("snapshot (event loop)", t1 - t0),
                        ("families (thread)", t2 - t1),
                        ("encode_text (thread)", t3 - t2),
                        ("prometheus_client generate_latest, for comparison", t4 - t3),
                    ):
                        times.setdefault(k, []).append(v)
                for k, v in times.items():
                    print(f"  {k}: {statistics.median(v) * 1000:.1f} ms")
            finally:
                await broker.stop()

    print(f"in process, {partitions} partitions (+100 internal), median of {rounds}:")
    asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--open-txns", type=int, default=50)
    ap.add_argument("--scrapes", type=int, default=20)
    args = ap.parse_args()
    per_topic = args.partitions // args.topics
    settings = {"metrics.listener": "http://127.0.0.1:0"}
    with EmbeddedBroker(settings=settings, log_level="WARNING") as b:
        assert b.http_url is not None and b.proc is not None
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        names = [f"scrape-{i:02d}" for i in range(args.topics)]
        started = time.monotonic()
        for f in admin.create_topics([NewTopic(n, per_topic, 1) for n in names]).values():
            f.result(120)
        print(
            f"created {args.topics} x {per_topic} partitions in {time.monotonic() - started:.1f}s"
        )
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        for n in names:
            for i in range(per_topic):
                p.produce(n, value=b"x" * 100, partition=i)
        p.flush(60)
        txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "scrape-open"})
        txn.init_transactions(30)
        txn.begin_transaction()
        for i in range(args.open_txns):
            txn.produce(names[i % len(names)], value=b"open", partition=i // len(names))
        txn.flush(30)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "scrape-group"})
        c.commit(
            offsets=[TopicPartition(names[0], i, 1) for i in range(per_topic)],
            asynchronous=False,
        )
        c.close()
        url = f"{b.http_url}/metrics"
        urllib.request.urlopen(url).read()  # warm up
        walls = []
        cpu0 = cpu_seconds(b.proc.pid)
        for _ in range(args.scrapes):
            t = time.perf_counter()
            body = urllib.request.urlopen(url).read()
            walls.append(time.perf_counter() - t)
        cpu = (cpu_seconds(b.proc.pid) - cpu0) / args.scrapes
        samples = sum(1 for line in body.decode().splitlines() if line and line[0] != "#")
        walls.sort()
        print(
            f"scrape of {args.partitions} partitions (+100 internal), {args.open_txns} open txns: "
            f"median {statistics.median(walls) * 1000:.1f} ms, "
            f"p90 {walls[int(len(walls) * 0.9) - 1] * 1000:.1f} ms, max {walls[-1] * 1000:.1f} ms "
            f"wall; broker CPU {cpu * 1000:.1f} ms per scrape; {len(body) / 1e6:.2f} MB, "
            f"{samples} samples"
        )
        txn.abort_transaction(30)
    phases(args.partitions, args.topics)
    print(f"hot path: {hot_path_cost():.2f} µs per request (counters + latency bucket)")


if __name__ == "__main__":
    main()
