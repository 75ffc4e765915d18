"""The web console end to end in headless Chromium (Debian's ``chromium``, driven by
Playwright; scripts/ensure-chromium.sh installs it): a hanging transaction is flagged,
aborted from the page behind its confirmation, and the LSO catches up with the high
watermark. The screenshot is kept as a test artifact: ``<pytest tmp dir>/console-*.png``,
also copied to ``$ONCELOG_TEST_ARTIFACTS`` when that is set."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
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
        row = page.locator(f'#partitions tr[data-topic="{topic_name}"]')
        expect(row.locator("td.hw")).to_have_text("3")
        expect(row.locator("td.lso")).to_have_text("1")
        expect(row.locator("td.lag")).to_have_text("2")
        # Flagged once open for longer than its 1 s timeout (panels refresh every 2 s).
        hanging = page.locator("#hanging tr.hanging")
        expect(hanging).to_have_count(1, timeout=10_000)
        expect(hanging).to_contain_text("stuck-app")
        expect(hanging).to_contain_text("overdue")
        txn_row = page.locator('#transactions tr[data-transactional-id="stuck-app"]')
        expect(txn_row).to_contain_text("HANGING")
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
