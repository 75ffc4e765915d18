"""``__transaction_state`` stays bounded under compaction.

Runs N transactions (default 100,000) of one transactional id against a broker
with ``transaction.state.log.segment.bytes=65536``, each: AddPartitionsToTxn,
one transactional record, EndTxn(commit), over the raw protocol. Prints the
on-disk size of ``__transaction_state`` after the run (before cleaning), once
the cleaner has compacted it, and the restart time from process start to the
broker's ready line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oncelog.client.wire import WireClient  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402
from tests.integration.wire_loops import run_transactions, topic_bytes  # noqa: E402

TXN_STATE = "__transaction_state"


def start_timed(data_dir: Path, settings: dict[str, str]) -> tuple[EmbeddedBroker, float]:
    """Start a broker; seconds from process start to its ready line."""
    t0 = time.monotonic()
    broker = EmbeddedBroker(data_dir, settings=settings).start(timeout=120)
    return broker, time.monotonic() - t0


def wait_until_cleaned(data_dir: Path, topic: str, below: int, timeout: float) -> int:
    """Wait until the topic takes less than ``below`` bytes (a pass writes only small
    ``.cleaned`` files, so the size hardly moves until the swap), then until it stops
    changing for 3 s (later passes, deferred deletes)."""
    deadline = time.monotonic() + timeout
    size = topic_bytes(data_dir, topic)
    while size >= below and time.monotonic() < deadline:
        time.sleep(0.25)
        size = topic_bytes(data_dir, topic)
    stable_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - stable_since < 3.0:
        time.sleep(0.25)
        now = topic_bytes(data_dir, topic)
        if now != size:
            size, stable_since = now, time.monotonic()
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--segment-bytes", type=int, default=65536)
    args = parser.parse_args()
    base = {
        "transaction.state.log.segment.bytes": str(args.segment_bytes),
        "log.cleaner.backoff.ms": "200",
        # Replaced segments are unlinked after 1 s instead of Kafka's 60 s, so the
        # figure below is the compacted size, not the compacted size plus *.deleted files.
        "log.segment.delete.delay.ms": "1000",
    }
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        # 1. The transactions, with the cleaner off so "before" is the uncleaned size.
        broker = EmbeddedBroker(data_dir, settings={**base, "log.cleaner.enable": "false"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("bench-txn", 1, 1)])["bench-txn"].result(15)
            del admin
            t0 = time.monotonic()
            with WireClient(broker.bootstrap) as c:
                run_transactions(c, "bench-txn-id", "bench-txn", args.transactions)
            elapsed = time.monotonic() - t0
        finally:
            broker.stop()
        before = topic_bytes(data_dir, TXN_STATE)
        # 2. Restart with the cleaner on (this start replays the uncleaned log).
        broker, ready_uncleaned = start_timed(data_dir, base)
        try:
            t0 = time.monotonic()
            after = wait_until_cleaned(data_dir, TXN_STATE, 4 * args.segment_bytes, timeout=600)
            cleaning = time.monotonic() - t0
        finally:
            broker.stop()
        # 3. Restart on the cleaned log.
        broker, ready_cleaned = start_timed(data_dir, base)
        broker.stop()
    print(
        f"transactions:                  {args.transactions:,} of one transactional id "
        f"({elapsed:.1f} s, {args.transactions / elapsed:,.0f}/s)"
    )
    print(f"transaction.state.log.segment.bytes={args.segment_bytes}")
    print(f"{TXN_STATE} before cleaning: {before:,} bytes")
    print(
        f"{TXN_STATE} after cleaning:  {after:,} bytes (within {cleaning:.1f} s of the ready line)"
    )
    print(f"restart to ready, uncleaned log: {ready_uncleaned:.2f} s")
    print(f"restart to ready, cleaned log:   {ready_cleaned:.2f} s")


if __name__ == "__main__":
    main()
