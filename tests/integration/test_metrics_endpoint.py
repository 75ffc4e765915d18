"""The broker's HTTP listener: /metrics while a transaction is open and after its commit,
exact HTTP statuses, and the console's abort of a hanging transaction (marker path)."""

from __future__ import annotations

import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .metrics_scrape import scrape, value, wait_for
from .test_transactions import READ_COMMITTED, end_offsets, txn_producer


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(
        tmp_path / "data", settings={"metrics.listener": "http://127.0.0.1:0"}
    ).start()
    try:
        yield b
    finally:
        b.stop()


def http(
    url: str, method: str = "GET", data: dict[str, str] | None = None, **headers: str
) -> tuple[int, str, str]:
    """(status, content type, body) without raising on 4xx."""
    body = None if data is None else urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_scrape_with_an_open_transaction_then_committed(
    metered: EmbeddedBroker, topic_name: str
) -> None:
    url = metered.http_url
    assert url is not None
    create_topic(metered.bootstrap, topic_name, 2)
    produce(metered.bootstrap, topic_name, [(None, b"plain", 0)] * 3)
    p = txn_producer(metered.bootstrap, "metrics-txn")
    p.begin_transaction()
    for _ in range(2):
        p.produce(topic_name, value=b"in-txn", partition=0)
    p.flush()
    time.sleep(0.3)  # the open transaction ages

    s = scrape(url)
    part0 = {"topic": topic_name, "partition": "0"}
    part1 = {"topic": topic_name, "partition": "1"}
    assert value(s, "oncelog_partition_high_watermark", **part0) == 5
    assert value(s, "oncelog_partition_last_stable_offset", **part0) == 3
    assert value(s, "oncelog_partition_lso_lag_offsets", **part0) == 2
    assert value(s, "oncelog_partition_open_transactions", **part0) == 1
    assert value(s, "oncelog_partition_lso_lag_seconds", **part0) >= 0.3
    assert value(s, "oncelog_partition_oldest_open_transaction_age_seconds", **part0) >= 0.3
    assert value(s, "oncelog_partition_lso_lag_offsets", **part1) == 0
    assert value(s, "oncelog_partition_lso_lag_seconds", **part1) == 0
    assert value(s, "oncelog_transactions", state="Ongoing") == 1
    assert value(s, "oncelog_transactional_ids") == 1
    assert value(s, "oncelog_producer_ids") == 2  # the idempotent and the transactional one
    assert value(s, "oncelog_hanging_transactions", kind="overdue") == 0
    assert value(s, "oncelog_hanging_transactions", kind="orphaned") == 0
    assert value(s, "oncelog_requests_total", api="INIT_PRODUCER_ID") == 2
    assert value(s, "oncelog_request_duration_seconds_count", api="INIT_PRODUCER_ID") == 2
    assert (
        value(s, "oncelog_request_duration_seconds_bucket", api="INIT_PRODUCER_ID", le="+Inf") == 2
    )
    assert value(s, "oncelog_topic_bytes_in_total", topic=topic_name) > 0
    assert value(s, "oncelog_connections") >= 1
    assert value(s, "oncelog_purgatory_size", operation="produce") == 0
    assert value(s, "oncelog_coordinator_load_seconds", coordinator="transaction") >= 0

    p.commit_transaction(15)
    s = wait_for(url, lambda s: value(s, "oncelog_partition_lso_lag_offsets", **part0) == 0)
    assert value(s, "oncelog_partition_lso_lag_offsets", **part0) == 0
    assert value(s, "oncelog_partition_high_watermark", **part0) == 6  # + the COMMIT marker
    assert value(s, "oncelog_partition_last_stable_offset", **part0) == 6
    assert value(s, "oncelog_partition_open_transactions", **part0) == 0
    assert value(s, "oncelog_partition_lso_lag_seconds", **part0) == 0
    assert value(s, "oncelog_transactions", state="Ongoing") == 0
    assert value(s, "oncelog_transactions", state="CompleteCommit") == 1
    assert value(s, "oncelog_requests_total", api="END_TXN") == 1

    # An EndTxn for an id the coordinator never saw: one error, counted by name.
    with TxnAdmin(ClientConfig(metered.bootstrap)) as admin:
        code = admin.end_txn("never-seen", 12345, 0, True)
    s = scrape(url)
    assert value(s, "oncelog_request_errors_total", api="END_TXN", error=code.name.upper()) == 1
    assert value(s, "oncelog_requests_total", api="END_TXN") == 2

    # A read_committed consumer's bytes out and its group's lag.
    c = Consumer(
        {
            "bootstrap.servers": metered.bootstrap,
            "group.id": "metrics-group",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic_name, 0, 0)])
    got = 0
    deadline = time.monotonic() + 15
    while got < 5 and time.monotonic() < deadline:
        got += len(c.consume(10, 1.0))
    assert got == 5
    c.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
    c.close()
    s = scrape(url)
    assert value(s, "oncelog_topic_bytes_out_total", topic=topic_name) > 0
    lag = {"group": "metrics-group", "topic": topic_name, "partition": "0"}
    assert value(s, "oncelog_consumer_group_lag_offsets", **lag) == 2  # HW 6 - committed 4


def test_http_statuses_and_refused_abort(metered: EmbeddedBroker) -> None:
    url = metered.http_url
    assert url is not None
    status, ctype, body = http(f"{url}/metrics")
    assert (status, ctype) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert "# TYPE oncelog_requests_total counter" in body
    status, ctype, body = http(f"{url}/metrics", Accept="application/openmetrics-text")
    assert status == 200
    assert ctype.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")
    status, ctype, body = http(f"{url}/")
    assert (status, ctype) == (200, "text/html; charset=utf-8")
    assert "abort of hanging transactions: disabled" in body.lower()
    assert http(f"{url}/static/htmx.min.js")[:2] == (200, "application/javascript")
    assert http(f"{url}/no-such-page")[0] == 404
    assert http(f"{url}/console/abort")[0] == 405
    form = {"topic": "t", "partition": "0", "producer_id": "1"}
    status, _, body = http(f"{url}/console/abort", "POST", form, **{"HX-Request": "true"})
    assert (status, body) == (
        403,
        "abort is disabled: start the broker with console.allow.abort=true",
    )


def test_console_aborts_an_orphaned_hanging_transaction(tmp_path: Path, topic_name: str) -> None:
    """find-hanging's case: the coordinator lost the transaction; the console's abort
    writes the ABORT marker (WriteTxnMarkers' service path) and the LSO catches up."""
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        "console.allow.abort": "true",
        "transaction.max.timeout.ms": "1000",
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "lost", **{"transaction.timeout.ms": 1000, "log_level": 0})
        p.begin_transaction()
        p.produce(topic_name, value=b"hanging")
        p.flush()
        produce(b.bootstrap, topic_name, [(None, b"stuck-behind", 0)])
        b.kill()
        for d in (tmp_path / "data").glob("__transaction_state-*"):
            shutil.rmtree(d)
        b.start()
        url = b.http_url
        assert url is not None
        part = {"topic": topic_name, "partition": "0"}
        s = wait_for(url, lambda s: value(s, "oncelog_hanging_transactions", kind="orphaned") == 1)
        assert value(s, "oncelog_hanging_transactions", kind="orphaned") == 1
        assert value(s, "oncelog_hanging_transactions", kind="overdue") == 0
        assert value(s, "oncelog_partition_lso_lag_offsets", **part) == 2
        status, _, page = http(f"{url}/console/hanging")
        assert status == 200 and 'class="abort" hx-post="/console/abort"' in page
        # The per-start token the console page carries (htmx sends it on every request).
        token = http(f"{url}/")[2].split('"X-Oncelog-Token": "')[1].split('"')[0]
        console = {"HX-Request": "true", "X-Oncelog-Token": token}
        form = {"topic": topic_name, "partition": "0", "producer_id": "999999"}
        assert http(f"{url}/console/abort", "POST", form, **console)[:1] == (409,)
        assert http(f"{url}/console/abort", "POST", {"topic": topic_name})[0] == 403
        # htmx's header alone (a script on another page can set it) is not enough.
        assert http(f"{url}/console/abort", "POST", form, **{"HX-Request": "true"})[:3:2] == (
            403,
            "abort must come from the console page (its token is missing)",
        )
        # Another origin, or a rebinding host name, is refused before anything else.
        assert (
            http(f"{url}/console/abort", "POST", form, **console, Origin="http://evil.example")[0]
            == 403
        )
        status, _, body = http(f"{url}/metrics", Host="rebound.evil.example")
        assert status == 403 and "metrics.listener.allowed.hosts" in body
        status, _, body = http(f"{url}/console/abort", "POST", {"topic": topic_name}, **console)
        assert (status, body) == (400, "expected form fields topic, partition and producer_id")
        pid = next(
            int(line.split('data-producer-id="')[1].split('"')[0])
            for line in page.split("<tr")
            if "data-producer-id" in line
        )
        form = {"topic": topic_name, "partition": "0", "producer_id": str(pid)}
        status, _, body = http(f"{url}/console/abort", "POST", form, **console)
        assert (status, body) == (
            200,
            f"wrote ABORT marker for producer {pid} to {topic_name}-0",
        )
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [3]
        s = scrape(url)
        assert value(s, "oncelog_partition_lso_lag_offsets", **part) == 0
        assert value(s, "oncelog_hanging_transactions", kind="orphaned") == 0
    finally:
        b.stop()


def test_metrics_listener_port_in_use_fails_start_naming_it(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "oncelog.cli.main",
                "broker",
                "--data-dir",
                str(tmp_path / "data"),
                "--listen",
                "127.0.0.1:0",
                "--set",
                f"metrics.listener=http://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert "ready" not in done.stdout
    err = [line for line in done.stderr.splitlines() if not line[:4].isdigit()]  # not log lines
    assert err == [
        f"error: cannot listen on 127.0.0.1:{port} (metrics.listener): address already in use"
    ]


def test_purgatories_count_waiting_produces_and_fetches(tmp_path: Path, topic_name: str) -> None:
    """Exact purgatory sizes: one acks=all produce held by the fdatasync hook, one
    long-polling fetch on an empty partition; both 0 once released."""
    import threading

    from confluent_kafka import Producer

    hold = tmp_path / "hold-fsync"
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        "oncelog.flush.on.ack": "true",
        "oncelog.debug.flush.hold.file": str(hold),
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        url = b.http_url
        assert url is not None
        create_topic(b.bootstrap, topic_name, 2)
        hold.touch()
        producer = Producer(
            {"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0, "retries": 0}
        )
        producer.produce(topic_name, value=b"held", partition=0)
        producer.poll(0)
        s = wait_for(url, lambda s: value(s, "oncelog_purgatory_size", operation="produce") == 1)
        assert value(s, "oncelog_purgatory_size", operation="produce") == 1
        hold.unlink()
        assert producer.flush(15) == 0
        s = wait_for(url, lambda s: value(s, "oncelog_purgatory_size", operation="produce") == 0)
        assert value(s, "oncelog_purgatory_size", operation="produce") == 0

        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "purgatory",
                "fetch.wait.max.ms": 5000,
            }
        )
        c.assign([TopicPartition(topic_name, 1, 0)])  # empty: the fetch parks
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                c.poll(0.2)

        t = threading.Thread(target=poll)
        t.start()
        try:
            s = wait_for(url, lambda s: value(s, "oncelog_purgatory_size", operation="fetch") == 1)
            assert value(s, "oncelog_purgatory_size", operation="fetch") == 1
        finally:
            stop.set()
            t.join(10)
            c.close()
        s = wait_for(url, lambda s: value(s, "oncelog_purgatory_size", operation="fetch") == 0)
        assert value(s, "oncelog_purgatory_size", operation="fetch") == 0
    finally:
        hold.unlink(missing_ok=True)
        b.stop()


def test_console_escapes_ids(metered: EmbeddedBroker, topic_name: str) -> None:
    url = metered.http_url
    assert url is not None
    create_topic(metered.bootstrap, topic_name, 1)
    p = txn_producer(metered.bootstrap, 'app<script>alert("x")</script>&')
    p.begin_transaction()
    p.produce(topic_name, value=b"v", partition=0)
    p.flush()
    status, _, page = http(f"{url}/console/transactions")
    assert status == 200
    assert "<script>" not in page
    assert "app&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    status, _, page = http(f"{url}/")
    assert status == 200 and page.count("<script") == 2  # htmx and the page's own script
    p.abort_transaction(15)
