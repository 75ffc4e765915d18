"""The example orders pipeline (oncelog.demo.pipeline) and the demo (oncelog.demo.spark_demo)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oncelog.demo.pipeline import (
    TAX_RATE,
    WATERMARK_MS,
    WINDOW_MS,
    PipelineConfig,
    create_topics,
    generate_orders,
    start_queries,
)
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import (
    check_window_totals,
    compare,
    open_transactions,
    order_ids,
    read_topic,
    stable,
)

from .apps.spark_common import spark, spark_broker, unique

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark", "spark_broker"]  # fixtures


def test_orders_pipeline_in_process(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    b = spark_broker.bootstrap
    orders, enriched, totals = unique("orders"), unique("enriched"), unique("totals")
    create_topics(b, [orders, enriched, totals], 2)
    stats = generate_orders(
        b, 3000, topic=orders, txn_size=200, transactional_id=unique("gen"), event_step_ms=100
    )
    assert stats.committed == 3000 and stats.aborted > 0
    cfg = PipelineConfig(
        bootstrap=b,
        checkpoint=str(tmp_path / "ck"),
        orders=orders,
        enriched=enriched,
        totals=totals,
        max_offsets=1500,
        available_now=True,
    )
    queries = start_queries(spark, cfg)
    for q in queries:
        assert q.awaitTermination(180)
        assert q.exception() is None, q.exception()

    inputs = read_topic(b, orders)
    assert len(inputs) == 3000
    out = read_topic(b, enriched)
    verdict = compare(order_ids(inputs), order_ids(out))
    assert verdict.ok, verdict.line()
    assert verdict.line() == "exactly-once verified: 3000 in, 3000 out, 0 duplicates, 0 missing"
    for r in out[:50]:
        o = json.loads(r.value or b"{}")
        assert r.key == o["order_id"].encode()
        assert o["tax"] == round(o["amount"] * TAX_RATE, 2) and o["total"] == round(
            o["amount"] * (1 + TAX_RATE), 2
        )
        assert o["size_class"] == (
            "small" if o["amount"] < 50 else "medium" if o["amount"] < 200 else "large"
        )
    check = check_window_totals(inputs, read_topic(b, totals), WINDOW_MS, WATERMARK_MS)
    assert check.ok and check.emitted >= check.expected_closed > 0, check
    for q in queries:
        assert open_transactions(b, f"oncelog-spark-{q.id}-") == []
    assert stable(b, enriched) and stable(b, totals)


def test_update_mode_is_rejected_by_spark_for_python_sinks(
    spark: Any, spark_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Documented limitation: PySpark 4.3's Python data source sinks support append and
    complete output modes only."""
    df = (
        spark.readStream.format("rate")
        .load()
        .groupBy("value")
        .count()
        .selectExpr("cast(value as string) as value")
    )
    q = (
        df.writeStream.format("oncelog")
        .outputMode("update")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("topic", "x")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    with pytest.raises(Exception, match="does not support Update mode"):
        q.awaitTermination(60)


@pytest.mark.slow
def test_demo_verifies_exactly_once(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from oncelog.demo.spark_demo import run_demo

    code = run_demo(4000, max_offsets=1500, console=Console(width=160))
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith("exactly-once")]
    assert verdicts == ["exactly-once verified: 4000 in, 4000 out, 0 duplicates, 0 missing"], out
    assert code == 0
    assert "SIGKILLed" in out
