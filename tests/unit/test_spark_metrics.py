"""The sink metrics file: where it lives, what a replayed batch reads as, and its bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncelog.spark import metrics
from oncelog.spark.metrics import BatchMetrics, metrics_path, report, sink_metrics


def batch(batch_id: int, records: int = 10, committed: int = 2) -> BatchMetrics:
    return BatchMetrics(batch_id, "committed", records, committed, 0, 12.5, True, 1_000 + batch_id)


def test_path_of_local_and_file_uri_checkpoints_only(tmp_path: Path) -> None:
    want = tmp_path / "oncelog" / "sink-metrics.jsonl"
    assert metrics_path(str(tmp_path)) == want
    assert metrics_path(f"file:{tmp_path}") == want
    assert metrics_path(f"file://{tmp_path}") == want
    assert metrics_path("hdfs://nn:8020/ck") is None
    assert metrics_path(None) is None and metrics_path("") is None


def test_report_then_read_back_in_batch_order_last_commit_wins(tmp_path: Path) -> None:
    ck = str(tmp_path / "ck")
    for m in (batch(0), batch(2), batch(1), batch(2, records=0, committed=3)):
        report(ck, m)
    assert sink_metrics(ck) == [batch(0), batch(1), batch(2, records=0, committed=3)]
    assert sink_metrics(str(tmp_path / "other")) == []


def test_non_local_checkpoint_is_logged_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="oncelog.spark"):
        report("hdfs://nn:8020/ck", batch(4))
    assert caplog.messages == [
        'oncelog sink batch metrics {"batch_id":4,"outcome":"committed","records":10,'
        '"transactions_committed":2,"transactions_aborted":0,"commit_latency_ms":12.5,'
        '"exactly_once":true,"timestamp_ms":1004}'
    ]


def test_file_is_cut_back_to_the_last_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "KEEP", 5)
    ck = str(tmp_path)
    for b in range(11):
        report(ck, batch(b))
    assert [m.batch_id for m in sink_metrics(ck)] == [6, 7, 8, 9, 10]
    report(ck, batch(11))
    assert [m.batch_id for m in sink_metrics(ck)] == [6, 7, 8, 9, 10, 11]


def test_unwritable_checkpoint_never_fails_the_commit(tmp_path: Path) -> None:
    blocker = tmp_path / "ck"
    blocker.write_text("a file where the checkpoint directory should be")
    report(str(blocker), batch(0))  # logged, not raised
    assert sink_metrics(str(tmp_path / "missing")) == []
