"""PostgresSource with exactly-once support across worker SIGKILLs: rows are inserted
while a worker process is killed (SIGKILL) three times in the middle of its
transactions and restarted; a read_committed reader finds every row exactly once in
the output topic, and the committed source offset matches the last row."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import psycopg
import pytest

from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import read_to_end
from .workers import WorkerProcess, wait_for, worker_settings

# xdist (make test): one worker runs the PostgreSQL tests, so the session's private server
# starts once.
pytestmark = pytest.mark.xdist_group("postgres")

ROWS = 4000


def _ids(bootstrap: str, isolation: str = "read_committed") -> list[int]:
    return [json.loads(m.value())["id"] for m in read_to_end(bootstrap, "eospg-src", isolation)]


def test_postgres_source_exactly_once_across_sigkills(
    broker: EmbeddedBroker, pg_url: str, tmp_path: Path
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE src (id BIGINT PRIMARY KEY, tag TEXT)")
    stop = threading.Event()

    def insert_rows() -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for first in range(1, ROWS + 1, 20):
                if stop.is_set():
                    return
                conn.execute(
                    "INSERT INTO src SELECT g, 'row' || g FROM generate_series(%s::bigint, %s::bigint) g",
                    (first, min(first + 19, ROWS)),
                )
                time.sleep(0.03)  # rows keep coming while workers are killed

    settings = worker_settings(
        broker.bootstrap, "eospg", **{"exactly.once.source.support": "enabled"}
    )
    config = {
        "connector.class": "PostgresSource",
        "connection.url": pg_url,
        "table.include.list": "src",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": "eospg-",
        "poll.interval.ms": "50",
        "batch.max.rows": "25",
        "exactly.once.support": "required",
    }
    inserter = threading.Thread(target=insert_rows, daemon=True)
    rng = random.Random(618)
    worker = WorkerProcess(settings, tmp_path / "w0.log").start()
    try:
        status, body = worker.call("POST", "/connectors", {"name": "eospg", "config": config})
        assert status == 201, body
        inserter.start()
        for round_ in range(3):
            seen = len(_ids(broker.bootstrap))
            # 100 more rows, or all of them: a fast worker may have exported every row
            # before it was killed (this waited for rows that never came, and failed).
            target = min(seen + 100, ROWS)
            wait_for(lambda t=target: len(_ids(broker.bootstrap)) >= t, 60, "progress")
            time.sleep(rng.uniform(0.05, 0.4))
            worker.kill()  # SIGKILL, mid-transaction most likely
            worker = WorkerProcess(settings, tmp_path / f"w{round_ + 1}.log").start()
        inserter.join(120)
        assert not inserter.is_alive()
        wait_for(lambda: len(_ids(broker.bootstrap)) >= ROWS, 120, "all rows")
        time.sleep(1)  # anything extra (a duplicate) would show up now
        ids = _ids(broker.bootstrap)
        assert sorted(ids) == list(range(1, ROWS + 1))
        assert len(ids) == len(set(ids)) == ROWS
        assert ids == sorted(ids)  # one table, one task: in order
        assert worker.get("/connectors/eospg/offsets") == {
            "offsets": [
                {
                    "partition": {"protocol": "1", "table": "public.src"},
                    "offset": {"incrementing": ROWS},
                }
            ]
        }
    finally:
        stop.set()
        worker.kill()
