"""Per-micro-batch metrics of the ``oncelog`` sink: records written, task transactions
committed and aborted, and the driver's commit latency.

PySpark 4.3's Python data source API has no custom metrics (the JVM's ``PythonCustomMetric``
are Spark's own: bytes and rows exchanged with the Python workers), and a Python sink adds
nothing to ``StreamingQueryProgress``. So the driver's commit, which knows all of them,
appends one JSON line per micro-batch to ``<checkpointLocation>/oncelog/sink-metrics.jsonl``
(local and ``file:`` checkpoints; the last :data:`KEEP` batches are kept) and logs the same
line at INFO on the ``oncelog.spark`` logger. :func:`sink_metrics` reads them back.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("oncelog.spark")

METRICS_FILE = Path("oncelog") / "sink-metrics.jsonl"
KEEP = 1000  # batches kept in the file; it is cut back to this when it reaches twice that


@dataclass(frozen=True, slots=True)
class BatchMetrics:
    """One micro-batch as the sink's driver-side commit (or abort) saw it."""

    batch_id: int
    outcome: str  # "committed" or "aborted"
    records: int  # rows the batch's tasks wrote (0 for a replay whose tasks found it decided)
    transactions_committed: int
    transactions_aborted: int  # task transactions aborted and leftovers fenced
    commit_latency_ms: float  # the driver's commit (or abort) from start to end
    exactly_once: bool
    timestamp_ms: int  # when the commit ended


def metrics_path(checkpoint: str | None) -> Path | None:
    """Where a query's sink metrics live; None when the checkpoint is not a local path."""
    if not checkpoint or "://" in checkpoint.removeprefix("file://"):
        return None
    return Path(checkpoint.removeprefix("file://").removeprefix("file:")) / METRICS_FILE


def report(checkpoint: str | None, metrics: BatchMetrics) -> None:
    """Log one batch's metrics and append them to the checkpoint's metrics file. Never
    fails the commit: a file that cannot be written is logged and skipped."""
    line = json.dumps(dataclasses.asdict(metrics), separators=(",", ":"))
    log.info("oncelog sink batch metrics %s", line)
    path = metrics_path(checkpoint)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(line + "\n")
        if path.stat().st_size > 2 * KEEP * len(line):
            lines = path.read_text().splitlines()
            if len(lines) > 2 * KEEP:
                tmp = path.with_suffix(".tmp")
                tmp.write_text("\n".join(lines[-KEEP:]) + "\n")
                tmp.replace(path)
    except OSError as exc:
        log.warning("cannot write the sink metrics to %s: %s", path, exc)


def sink_metrics(checkpoint: str) -> list[BatchMetrics]:
    """The sink metrics of the query with this checkpoint location, one per micro-batch in
    batch order (a batch committed again after a restart: its last commit)."""
    path = metrics_path(checkpoint)
    if path is None or not path.exists():
        return []
    by_batch: dict[int, BatchMetrics] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            m = BatchMetrics(**json.loads(line))
            by_batch[m.batch_id] = m
    return [by_batch[b] for b in sorted(by_batch)]


def now_ms() -> int:
    return int(time.time() * 1000)
