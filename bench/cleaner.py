"""Produce latency with the log cleaner idle and busy, in one broker run.

A probe producer sends one 100-byte record at a time (acks=all, linger 0) to a
plain topic and times each delivery. Phase "idle": the cleaner has nothing to
do. Then a large dirty log is made compactable (AlterConfigs cleanup.policy=
compact) and the probe runs again while the cleaner compacts it ("busy"; only
probes sent before the cleaner's "cleaned ..." log line count). p50/p99/max
of both phases and the cleaner's own rate are printed.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from oncelog.embedded import EmbeddedBroker

CLEANED = re.compile(r"cleaned (\S+) up to offset \d+ in ([\d.]+) s: (\d+) -> (\d+) bytes")


def probe(producer: Producer, topic: str, seconds: float, stop_when=None) -> list[float]:  # type: ignore[no-untyped-def]
    lat: list[float] = []
    payload = b"p" * 100
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if stop_when is not None and stop_when():
            break
        t0 = time.perf_counter()
        producer.produce(topic, value=payload)
        producer.flush(10)
        lat.append((time.perf_counter() - t0) * 1000)
    return lat


def summary(name: str, lat: list[float]) -> str:
    lat = sorted(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return (
        f"{name:5s} n={len(lat):6d}  p50={statistics.median(lat):6.2f} ms  "
        f"p99={p99:6.2f} ms  max={lat[-1]:7.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=400_000, help="records in the dirty log")
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--idle-seconds", type=float, default=8.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-") as tmp:
        settings = {"log.cleaner.backoff.ms": "100"}
        broker = EmbeddedBroker(Path(tmp) / "data", settings=settings, log_level="INFO").start()
        try:
            run(broker, args)
        finally:
            broker.stop()


def run(broker: EmbeddedBroker, args: argparse.Namespace) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    dirty_cfg = {"cleanup.policy": "delete", "segment.bytes": str(8 << 20), "segment.ms": "2000"}
    for topic, cfg in (("probe", {}), ("dirty", dirty_cfg)):
        admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(30)
    bulk = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 500_000})
    value = b"v" * 100
    for i in range(args.records):
        while True:
            try:
                bulk.produce("dirty", key=b"key-%06d" % (i % args.keys), value=value)
                break
            except BufferError:
                bulk.poll(0.05)
    bulk.flush(120)
    time.sleep(2.1)  # segment.ms, then one more record: everything before is cleanable
    bulk.produce("dirty", key=b"roll", value=value)
    bulk.flush(10)
    size = sum(f.stat().st_size for f in (broker.data_dir / "dirty-0").glob("*.log"))
    print(f"dirty log: {args.records} records, {args.keys} keys, {size / 1e6:.1f} MB")

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
    probe(producer, "probe", 1.0)  # warm-up
    idle = probe(producer, "probe", args.idle_seconds)

    log_start = broker.log_path.stat().st_size
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "dirty",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(15)

    def cleaned() -> re.Match[str] | None:
        with open(broker.log_path) as f:
            f.seek(log_start)
            return CLEANED.search(f.read())

    busy = probe(producer, "probe", 600, stop_when=cleaned)
    done = cleaned()
    print(summary("idle", idle))
    print(summary("busy", busy))
    if done is not None:
        seconds, before, after = float(done.group(2)), int(done.group(3)), int(done.group(4))
        print(
            f"cleaner: {before / 1e6:.1f} MB -> {after / 1e6:.2f} MB in {seconds:.1f} s "
            f"({before / 1e6 / seconds:.1f} MB/s)"
        )


if __name__ == "__main__":
    main()
