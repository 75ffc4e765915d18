"""One notion of "hanging": ``oncelog transactions find-hanging`` and the web console
report the same transactions, with the same reason (oncelog.hanging's rule)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def cli_hanging(bootstrap: str) -> list[dict[str, object]]:
    out = cli("transactions", "find-hanging", "-b", bootstrap, "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def console_hanging(http_url: str) -> list[tuple[str, int, int, str]]:
    """(topic, partition, producer id, kind) of each row of the console's panel."""
    with urllib.request.urlopen(http_url + "/console/hanging", timeout=10) as response:
        html = response.read().decode()
    rows = re.findall(
        r'<tr class="hanging" data-producer-id="(\d+)"><td class="id">([^<]+)</td>'
        r"<td>(\d+)</td>.*?<td title=\"[^\"]*\">(\w+)</td>",
        html,
    )
    return [(topic, int(part), int(pid), kind) for pid, topic, part, kind in rows]


def open_transaction(bootstrap: str, topic: str, txn_id: str, timeout_ms: int) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": timeout_ms,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush(30)
    return p


def wait_for_hanging(bootstrap: str, within_s: float = 60.0) -> list[dict[str, object]]:
    """find-hanging's rows once it reports any (a loaded machine may take a while)."""
    deadline = time.monotonic() + within_s
    while True:
        rows = cli_hanging(bootstrap)
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


# Generous timeouts: the "not hanging yet" checks start a CLI process each, which can take
# seconds on a loaded two-core machine, and must finish before the transaction is overdue.
TIMEOUT_MS = 10_000


def test_an_overdue_transaction_is_hanging_for_both(tmp_path: Path) -> None:
    """Past its timeout, before the coordinator's next abort sweep: overdue, in both."""
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        # The sweep that aborts timed-out transactions runs rarely: the transaction stays
        # overdue long enough to look at.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        assert b.http_url is not None
        create_topic(b.bootstrap, "late", 1)
        producer = open_transaction(b.bootstrap, "late", "late-txn", TIMEOUT_MS)
        assert cli_hanging(b.bootstrap) == [] and console_hanging(b.http_url) == []
        [row] = wait_for_hanging(b.bootstrap)
        assert (row["topic"], row["partition"], row["transactional_id"], row["kind"]) == (
            "late",
            0,
            "late-txn",
            "overdue",
        )
        assert row["reason"] == (
            "open longer than its transaction timeout; the coordinator should have aborted it"
        )
        assert console_hanging(b.http_url) == [("late", 0, row["producer_id"], "overdue")]
        del producer


def test_an_orphaned_transaction_is_hanging_for_both(tmp_path: Path) -> None:
    """The coordinator lost the transaction: orphaned, in both, once the producer has been
    idle past transaction.max.timeout.ms (the broker's, which the CLI reads)."""
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        "transaction.max.timeout.ms": str(TIMEOUT_MS),
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, "lost", 1)
        producer = open_transaction(b.bootstrap, "lost", "lost-txn", TIMEOUT_MS)
        del producer
        b.kill()
        for d in (tmp_path / "data").glob("__transaction_state-*"):
            shutil.rmtree(d)
        b.start()
        assert b.http_url is not None
        assert cli_hanging(b.bootstrap) == [] and console_hanging(b.http_url) == []
        [row] = wait_for_hanging(b.bootstrap)
        assert (row["topic"], row["transactional_id"], row["kind"]) == ("lost", None, "orphaned")
        assert console_hanging(b.http_url) == [("lost", 0, row["producer_id"], "orphaned")]
    finally:
        b.stop()
