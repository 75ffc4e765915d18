"""The settings tables in the docs are generated from the definitions, and kept so."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncelog.broker.config import BROKER_CONFIG_DEF
from oncelog.cli.config_docs import TABLES, regenerate
from oncelog.config import ConfigDef, ConfigType, Importance
from oncelog.config.docs import refresh, table
from oncelog.config.validators import Range

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_tables_are_up_to_date() -> None:
    stale = [page for page, (old, new) in regenerate(ROOT).items() if old != new]
    assert stale == [], "settings tables out of date: run python -m oncelog.cli.config_docs"


def test_every_broker_setting_has_a_row() -> None:
    page = (ROOT / "docs/configuration.md").read_text()
    missing = [name for name in BROKER_CONFIG_DEF.names() if f"| `{name}` |" not in page]
    assert missing == []
    assert {t.page for t in TABLES} == {
        "docs/configuration.md",
        "docs/spark.md",
        "docs/connect.md",
    }


def test_refresh_rewrites_only_between_the_markers() -> None:
    definition = ConfigDef().define(
        "a.b", ConfigType.INT, 5, Range.at_least(1), Importance.HIGH, "An | example."
    )
    generated = table(definition.keys())
    assert generated.splitlines()[2] == "| `a.b` | int | `5` | [1,...] | high | An \\| example. |"
    page = "intro\n<!-- config-table:x -->\nold\nrows\n<!-- /config-table:x -->\nafter\n"
    assert refresh(page, "x", generated) == (
        f"intro\n<!-- config-table:x -->\n{generated}\n<!-- /config-table:x -->\nafter\n"
    )
    with pytest.raises(ValueError, match="no <!-- config-table:y -->"):
        refresh(page, "y", generated)
