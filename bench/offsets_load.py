"""Start-up load of ``__consumer_offsets``: records/s decoded and the group load's time.

    PYTHONPATH=src python bench/offsets_load.py [--records N] [--dir PATH]

Builds (once, in ``--dir``) a data directory holding N offset-commit records (100 per
batch, as an OffsetCommit of 100 partitions), then times: decoding every record with
``decode_record`` (the slow, schema-reader path) and with ``decode_record_fast``; and
``GroupService``'s full synchronous load.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from oncelog.broker.topics import TopicRegistry
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.coordinator.runtime import Append
from oncelog.group.config import GroupConfig
from oncelog.group.offsets_codec import (
    OffsetValue,
    decode_record,
    decode_record_schema,
    encode_offset_key,
    encode_offset_value,
)
from oncelog.group.service import GroupService
from oncelog.storage.replay import iter_log


def _unused_verify(*args: object, **kwargs: object) -> object:
    raise AssertionError


def build(path: Path, records: int) -> None:
    topics = TopicRegistry(path, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    groups = GroupService(GroupConfig(), topics=topics, verify_txn=_unused_verify)  # type: ignore[arg-type]
    groups._load()
    per_batch = 100
    now = int(time.time() * 1000)
    for b in range(records // per_batch):
        group = f"group-{b % 500}"
        batch = tuple(
            (
                encode_offset_key(group, f"topic-{(b // 500) % 20}", p),
                encode_offset_value(OffsetValue(b * 7 + p, 3, "", now)),
            )
            for p in range(per_batch)
        )
        part = groups.coordinator.partition_for(group)
        groups.runtime.append_unowned(Append(part, batch))
    topics.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/oncelog-offsets-load"))
    args = ap.parse_args()
    if not (args.dir / "marker-built").exists():
        t = time.monotonic()
        build(args.dir, args.records)
        (args.dir / "marker-built").write_text("")
        print(f"built {args.records} records in {time.monotonic() - t:.1f}s")
    topics = TopicRegistry(args.dir, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    parts = list(topics.topics[CONSUMER_OFFSETS_TOPIC].partitions)
    entries = [(e.key, e.value) for part in parts for e in iter_log(part)]
    n = len(entries)
    t = time.monotonic()
    for key, value in entries:
        decode_record_schema(key, value)  # type: ignore[arg-type]
    slow = time.monotonic() - t
    print(f"decode_record_schema (before): {n} records in {slow:.2f}s = {n / slow:,.0f} records/s")
    t = time.monotonic()
    for key, value in entries:
        decode_record(key, value)  # type: ignore[arg-type]
    fast = time.monotonic() - t
    print(f"decode_record (fast path): {n} records in {fast:.2f}s = {n / fast:,.0f} records/s")
    t = time.monotonic()
    for part in parts:
        for _ in iter_log(part):
            pass
    print(f"iter_log alone: {time.monotonic() - t:.2f}s")
    groups = GroupService(GroupConfig(), topics=topics, verify_txn=_unused_verify)  # type: ignore[arg-type]
    t = time.monotonic()
    groups._load()
    print(
        f"GroupService load: {time.monotonic() - t:.2f}s ({n / (time.monotonic() - t):,.0f} records/s)"
    )
    topics.close()


if __name__ == "__main__":
    main()
