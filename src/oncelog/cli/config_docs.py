"""Generates the settings tables in the docs from their definitions.

``python -m oncelog.cli.config_docs`` rewrites every table between its markers
(:mod:`oncelog.config.docs`); ``--check`` only reports the pages that are out of date
(exit status 1), as the unit test does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from oncelog.broker.config import BROKER_CONFIG_DEF
from oncelog.config.docs import grouped_tables, refresh, table
from oncelog.connect.runtime.worker_config import worker_config_def
from oncelog.spark.option_defs import READ_OPTIONS_DEF, WRITE_OPTIONS_DEF
from oncelog.storage.config import TOPIC_CONFIG_DEF

BROKER_GROUPS = {
    "core": "Broker and listeners",
    "topics": "Topics",
    "log": "Logs (the broker-wide defaults of topic configs)",
    "cleaner": "Log cleaner (compaction)",
    "transactions": "Transactions and producer state",
    "groups": "Consumer groups",
    "network": "Requests and connections",
    "security": "Security (TLS, SASL, authorization)",
    "http": "HTTP listener (metrics and console)",
    "durability": "Durability and the event loop",
    "compatibility": "Accepted from Kafka, no effect on one node",
    "testing": "Test hooks",
}


@dataclass(frozen=True)
class Table:
    name: str
    page: str  # relative to the repository root
    render: Callable[[], str]


TABLES = (
    Table(
        "broker", "docs/configuration.md", lambda: grouped_tables(BROKER_CONFIG_DEF, BROKER_GROUPS)
    ),
    Table("topic", "docs/configuration.md", lambda: table(TOPIC_CONFIG_DEF.keys())),
    Table("spark-read", "docs/spark.md", lambda: table(READ_OPTIONS_DEF.keys())),
    Table("spark-write", "docs/spark.md", lambda: table(WRITE_OPTIONS_DEF.keys())),
    Table("connect-worker", "docs/connect.md", lambda: table(worker_config_def().keys())),
)


def regenerate(root: Path) -> dict[str, tuple[str, str]]:
    """``{page: (current text, text with every table regenerated)}``."""
    pages: dict[str, tuple[str, str]] = {}
    for t in TABLES:
        current, new = pages.get(t.page) or ((root / t.page).read_text(),) * 2
        pages[t.page] = (current, refresh(new, t.name, t.render()))
    return pages


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m oncelog.cli.config_docs",
        description="Regenerate the settings tables in the docs from their definitions.",
    )
    parser.add_argument(
        "--check", action="store_true", help="only report stale pages (exit 1), write nothing"
    )
    args = parser.parse_args(argv)  # an unknown flag is a usage error (exit 2), not a write
    root = Path(__file__).resolve().parents[3]
    pages = regenerate(root)
    stale = [page for page, (old, new) in pages.items() if old != new]
    if args.check:
        for page in stale:
            print(f"{page}: settings tables out of date; run python -m oncelog.cli.config_docs")
        return 1 if stale else 0
    for page in stale:
        (root / page).write_text(pages[page][1])
    print(f"refreshed: {', '.join(stale) or 'nothing (all up to date)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
