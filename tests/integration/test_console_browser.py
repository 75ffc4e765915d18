"""The web console end to end in headless Chromium (Debian's ``chromium``, driven by
Playwright; scripts/ensure-chromium.sh installs it): a hanging transaction is flagged,
aborted from the page behind its confirmation, and the LSO catches up with the high
watermark; problems come first (the hanging transaction tops the transactions table,
internal and idle topics wait behind a toggle, a caught-up read_committed group shows no
lag to the LSO, above the fold). The screenshots are kept as a test artifact: ``<pytest tmp dir>/console-*.png``,
also copied to ``$ONCELOG_TEST_ARTIFACTS`` when that is set."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import Browser, Dialog, expect, sync_playwright

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_transactions import READ_COMMITTED, end_offsets, txn_producer

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "run scripts/ensure-chromium.sh (make install does)"
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            b.close()


def keep(shot: Path) -> None:
    target = os.environ.get("ONCELOG_TEST_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


def test_console_flags_and_aborts_a_hanging_transaction(
    tmp_path: Path, topic_name: str, browser: Browser
) -> None:
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        "console.allow.abort": "true",
        # The coordinator's own timeout sweep is off: the transaction outlives its
        # transaction.timeout.ms and hangs, as when the coordinator falls behind.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000",
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        url = b.http_url
        assert url is not None
        create_topic(b.bootstrap, topic_name, 1)
        produce(b.bootstrap, topic_name, [(None, b"before", 0)])
        # A producer that begins, produces, flushes and stops without committing.
        stuck = txn_producer(
            b.bootstrap, "stuck-app", **{"transaction.timeout.ms": 1000, "log_level": 0}
        )
        stuck.begin_transaction()
        stuck.produce(topic_name, value=b"never-committed", partition=0)
        stuck.produce(topic_name, value=b"never-committed", partition=0)
        stuck.flush()
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [1]

        page = browser.new_page()
        dialogs: list[str] = []
        page.goto(url)
        # The topic's row sums its partitions; expanded, it lists them.
        topic_row = page.locator(f'#partitions tr.topic[data-topic="{topic_name}"]')
        expect(topic_row.locator("td.lag")).to_have_text("2")
        expect(topic_row.locator("td.open-txns")).to_have_text("1")
        topic_row.locator("button.expand").click()
        row = page.locator(f'#partitions tr.partition[data-topic="{topic_name}"]')
        expect(row).to_be_visible()
        expect(row.locator("td.hw")).to_have_text("3")
        expect(row.locator("td.lso")).to_have_text("1")
        expect(row.locator("td.lag")).to_have_text("2")
        # Flagged once open for longer than its 1 s timeout (panels refresh every 2 s).
        hanging = page.locator("#hanging tr.hanging")
        expect(hanging).to_have_count(1, timeout=10_000)
        expect(hanging).to_contain_text("stuck-app")
        expect(hanging).to_contain_text("overdue")
        txn_row = page.locator('#transactions tr[data-transactional-id="stuck-app"]')
        expect(txn_row).to_contain_text("HANGING (overdue)")
        expect(txn_row.locator("td.state")).to_have_text("Ongoing")
        expect(page.locator(f'.chart-lag[data-topic="{topic_name}"]')).to_have_text(
            "2", timeout=10_000
        )
        shot = tmp_path / "console-hanging.png"
        page.screenshot(path=str(shot), full_page=True)
        keep(shot)

        # Dismissing the confirmation aborts nothing.
        def dismiss(d: Dialog) -> None:
            dialogs.append(d.message)
            d.dismiss()

        page.once("dialog", dismiss)
        hanging.locator("button.abort").click()
        page.wait_for_timeout(500)
        assert len(dialogs) == 1 and dialogs[0].startswith("Abort the transaction of producer")
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [1]
        expect(page.locator("#abort-result")).to_have_text("")

        def accept(d: Dialog) -> None:
            dialogs.append(d.message)
            d.accept()

        page.once("dialog", accept)
        hanging.locator("button.abort").click()
        expect(page.locator("#abort-result")).to_contain_text("aborted stuck-app", timeout=20_000)
        assert len(dialogs) == 2
        # The LSO catches up: the ABORT marker is the last offset.
        expect(row.locator("td.lag")).to_have_text("0", timeout=10_000)
        expect(row.locator("td.hw")).to_have_text("4")
        expect(row.locator("td.lso")).to_have_text("4")
        expect(page.locator("#hanging")).to_contain_text("no hanging transactions")
        expect(txn_row.locator("td.state")).to_have_text("Empty")
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [4]
        expect(page.locator(f'.chart-lag[data-topic="{topic_name}"]')).to_have_text(
            "0", timeout=10_000
        )
        shot = tmp_path / "console-aborted.png"
        page.screenshot(path=str(shot), full_page=True)
        keep(shot)
        assert shot.stat().st_size > 10_000
    finally:
        b.stop()


def test_console_puts_problems_first(tmp_path: Path, topic_name: str, browser: Browser) -> None:
    """A toy setup with 20 completed transactions, one hanging, an idle topic and a
    read_committed group caught up behind the open transaction: the hanging one tops the
    transactions table, internal and idle topics wait behind their toggle, the chart has
    axes, the group shows 0 lag to the LSO, and its row is above the fold."""
    settings = {
        "metrics.listener": "http://127.0.0.1:0",
        # No timeout sweep: the open transaction outlives its timeout and hangs.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000",
    }
    held, done, idle = f"{topic_name}-held", f"{topic_name}-done", f"{topic_name}-idle"
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        url = b.http_url
        assert url is not None
        for t in (held, done, idle):
            create_topic(b.bootstrap, t, 1)
        # 20 completed transactions, named to sort before the hanging one.
        completed = [f"app-{i:02d}" for i in range(20)]
        for txn_id in completed:
            p = txn_producer(b.bootstrap, txn_id)
            p.begin_transaction()
            p.produce(done, value=b"done", partition=0)
            p.commit_transaction(15)
        produce(b.bootstrap, held, [(None, b"committed", 0)] * 3)
        stuck = txn_producer(
            b.bootstrap, "zz-stuck", **{"transaction.timeout.ms": 1000, "log_level": 0}
        )
        stuck.begin_transaction()
        stuck.produce(held, value=b"open", partition=0)
        stuck.produce(held, value=b"open", partition=0)
        stuck.flush()
        assert end_offsets(b.bootstrap, held, 1, READ_COMMITTED) == [3]
        # A read_committed group reads all it can (up to the LSO, 3) and commits.
        consumer = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "rc-group",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(held, 0, 0)])
        got = 0
        deadline = time.monotonic() + 15
        while got < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == 3
        assert consumer.poll(1.0) is None  # nothing more for read_committed
        consumer.commit(asynchronous=False)
        consumer.close()

        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(url)
        # Hanging first (once past its 1 s timeout), then the completed ones, oldest first.
        rows = page.locator("#transactions tbody tr")
        expect(rows.first).to_have_attribute("data-transactional-id", "zz-stuck", timeout=10_000)
        expect(rows.first).to_contain_text("HANGING (overdue)")
        expect(rows.first.locator("td.state")).to_have_text("Ongoing")
        expect(rows).to_have_count(21)
        ids = [r.get_attribute("data-transactional-id") for r in rows.all()]
        assert ids == ["zz-stuck", *completed]
        assert rows.nth(1).locator("td.state").inner_text() == "CompleteCommit"
        expect(page.locator("#transactions tr.hanging")).to_have_count(1)

        # Topics: one row each; internal and idle ones hidden until the toggle.
        topic_rows = page.locator("#partitions tr.topic")
        quiet = ["__consumer_offsets", "__transaction_state", idle]
        for name in (held, done):
            expect(page.locator(f'#partitions tr.topic[data-topic="{name}"]')).to_be_visible()
        for name in quiet:
            expect(page.locator(f'#partitions tr.topic[data-topic="{name}"]')).to_be_hidden()
        expect(page.locator("#partitions .quiet-note")).to_contain_text(
            "3 internal or idle topics hidden"
        )
        held_row = page.locator(f'#partitions tr.topic[data-topic="{held}"]')
        expect(held_row.locator("td.count")).to_have_text("1")
        expect(held_row.locator("td.hw")).to_have_text("5")
        expect(held_row.locator("td.lag")).to_have_text("2")
        expect(held_row.locator("td.open-txns")).to_have_text("1")
        done_row = page.locator(f'#partitions tr.topic[data-topic="{done}"]')
        expect(done_row.locator("td.hw")).to_have_text("40")  # 20 records, 20 markers
        expect(done_row.locator("td.lag")).to_have_text("0")

        # The chart: y axis in offsets up to the lag (2), x axis of clock times.
        expect(page.locator(f'.chart-lag[data-topic="{held}"]')).to_have_text("2")
        svg = page.locator("#chart svg")
        expect(svg.locator("text.y-title")).to_have_text("LSO lag (offsets)")
        expect(svg.locator("text.x-title")).to_have_text("time (UTC)")
        expect(svg.locator("text.y-tick")).to_have_text(["0", "1", "2"])
        page.wait_for_timeout(2500)  # a few more samples
        x_labels = svg.locator("text.x-tick").all_text_contents()
        assert len(x_labels) >= 2, x_labels
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d", x) for x in x_labels), x_labels
        assert x_labels == sorted(x_labels)

        # The read_committed group: caught up (0 to the LSO), 2 to the log end.
        group_row = page.locator(f'#groups tr[data-group="rc-group"][data-topic="{held}"]')
        expect(group_row.locator("td.committed")).to_have_text("3")
        expect(group_row.locator("td.lso")).to_have_text("3")
        expect(group_row.locator("td.hw")).to_have_text("5")
        expect(group_row.locator("td.lag-lso")).to_have_text("0")
        expect(group_row.locator("td.lag-end .n")).to_have_text("2")
        # How long ago the first record it has not read (the open transaction's) was written.
        expect(group_row.locator("td.lag-end .age")).to_have_text(re.compile(r"^\(\d+\.\d s\)$"))
        # Above the fold of a 1280x720 window.
        box = group_row.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 720, box
        shot = tmp_path / "console-problems-first.png"
        page.screenshot(path=str(shot))  # the first screen only: what is above the fold
        keep(shot)

        # The toggle shows internal and idle topics, and the choice survives refreshes.
        page.locator('label[for="show-quiet"]').click()
        for name in quiet:
            expect(page.locator(f'#partitions tr.topic[data-topic="{name}"]')).to_be_visible()
        expect(page.locator(f'#partitions tr.topic[data-topic="{idle}"]')).to_contain_text("(idle)")
        expect(
            page.locator('#partitions tr.topic[data-topic="__consumer_offsets"]')
        ).to_contain_text("(internal)")
        held_row.locator("button.expand").click()
        part = page.locator(f'#partitions tr.partition[data-topic="{held}"][data-partition="0"]')
        expect(part).to_be_visible()
        expect(part.locator("td.lso")).to_have_text("3")
        page.wait_for_timeout(2500)  # a refresh of the panel
        expect(part).to_be_visible()
        for name in quiet:
            expect(page.locator(f'#partitions tr.topic[data-topic="{name}"]')).to_be_visible()
        expect(topic_rows).to_have_count(5)
        shot = tmp_path / "console-all-topics.png"
        page.screenshot(path=str(shot), full_page=True)
        keep(shot)
    finally:
        b.stop()
