"""docs/grafana-dashboard.json is a valid dashboard whose every query names documented
metrics (tests/integration/test_grafana_dashboard_metrics.py scrapes a real broker)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
METRIC = re.compile(r"\boncelog_[a-z0-9_]+")


def dashboard() -> dict:
    return json.loads((DOCS / "grafana-dashboard.json").read_text())


def queried_metrics() -> set[str]:
    return {
        name
        for panel in dashboard()["panels"]
        for target in panel.get("targets", ())
        for name in METRIC.findall(target["expr"])
    }


def test_dashboard_is_valid_json_with_unique_panels_in_the_grid() -> None:
    d = dashboard()
    assert d["uid"] == "oncelog-broker"
    assert [v["name"] for v in d["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) == 34
    for p in d["panels"]:
        grid = p["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["targets"], p["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])


def test_every_queried_metric_is_documented() -> None:
    documented = set(METRIC.findall((DOCS / "metrics.md").read_text()))
    base = {re.sub(r"_(bucket|sum|count)$", "", m) for m in queried_metrics()}
    assert len(base) == 39  # every broker metric family
    assert base - documented == set()
