"""A broker restart over a data directory full of offset commits (see offsets_load.py,
which builds one): time to the ready line, time until a raw OffsetFetch is answered
without COORDINATOR_LOAD_IN_PROGRESS, and the load time the broker logs.

    PYTHONPATH=src python bench/restart_load.py [--dir /tmp/oncelog-offsets-load]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import request as of

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

LOADED = re.compile(r"loaded (\d+) groups from (\d+) records .* in ([0-9.]+)s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/oncelog-offsets-load"))
    args = ap.parse_args()
    b = EmbeddedBroker(args.dir, log_path=args.dir.parent / "restart-load.log")
    skip = len(b.log_path.read_text().splitlines()) if b.log_path.exists() else 0
    started = time.monotonic()
    b.start(timeout=300)
    ready = time.monotonic() - started
    loading = 0
    try:
        with WireClient(b.bootstrap, timeout=300) as c:
            while True:
                reply = c.request(of.OffsetFetchRequest(group_id="group-1", topics=None))
                if reply.error_code != ErrorCode.coordinator_load_in_progress:
                    break
                loading += 1
                time.sleep(0.02)
        answered = time.monotonic() - started
        assert reply.error_code == ErrorCode.none
        n = sum(len(t.partitions) for t in reply.topics)
    finally:
        b.stop()
    lines = b.log_path.read_text().splitlines()[skip:]
    m = next(m for line in lines if (m := LOADED.search(line)))
    print(
        f"ready line after {ready:.2f}s; OffsetFetch answered after {answered:.2f}s "
        f"({loading} LOAD_IN_PROGRESS answers, {n} offsets for group-1); "
        f"broker log: {m.group(2)} records loaded in {m.group(3)}s"
    )


if __name__ == "__main__":
    main()
