"""The example orders pipeline, exactly-once end to end on Spark.

    orders (JSON: order_id, customer, amount, ts; written by transactional producers, some
    transactions aborted)
      -> [query "orders-enrich"] tax, total, size class, 1:1    -> orders-enriched
      -> [query "order-totals"]  per-customer totals per 1-minute
         event-time window, watermarked, append mode            -> order-totals

Both queries read with the oncelog source (read_committed: aborted orders never count) and
write with the oncelog sink (exactly-once). Run it against any Kafka-protocol cluster:

    python -m oncelog.demo.pipeline --bootstrap HOST:PORT --checkpoint DIR [--available-now]
    spark-submit --master local[2] examples/orders_pipeline.py --bootstrap HOST:PORT --checkpoint DIR

(the data source is pure Python: no --packages / Kafka jar is needed).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ORDERS, ENRICHED, TOTALS = "orders", "orders-enriched", "order-totals"
CUSTOMERS = 200
TAX_RATE = 0.2
WINDOW_MS = 60_000
WATERMARK_MS = 60_000
WINDOW = "1 minute"
WATERMARK = "1 minute"
EVENT_STEP_MS = 10  # simulated event time: consecutive orders are 10 ms apart


# -- the input generator ------------------------------------------------------------------------


@dataclass
class GeneratorStats:
    committed: int = 0
    aborted: int = 0
    transactions: int = 0
    aborted_transactions: int = 0


def make_order(seq: int, rng: random.Random, ts_ms: int) -> dict[str, Any]:
    return {
        "order_id": f"o-{seq:09d}",
        "customer": f"c-{rng.randrange(CUSTOMERS):04d}",
        "amount": rng.randrange(100, 50_000) / 100.0,
        "ts": ts_ms,
    }


def generate_orders(
    bootstrap: str,
    records: int,
    *,
    topic: str = ORDERS,
    txn_size: int = 500,
    abort_ratio: float = 0.2,
    seed: int = 7,
    transactional_id: str = "orders-generator",
    event_step_ms: int = EVENT_STEP_MS,
    on_progress: Callable[[GeneratorStats], None] | None = None,
) -> GeneratorStats:
    """Write orders in transactions until exactly ``records`` orders are committed; about
    ``abort_ratio`` of the transactions (with their orders) are aborted. Event times follow
    a simulated clock, ``event_step_ms`` apart, so that event-time windows close."""
    from oncelog.client.kafka_producer import KafkaProducer

    rng = random.Random(seed)
    base_ms = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS
    producer = KafkaProducer.of(
        ClientConfig(bootstrap),
        **{
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "enable.sparse.connections": False,
        },
    )
    producer.init_transactions(30)
    stats = GeneratorStats()
    seq = 0
    while stats.committed < records:
        abort = rng.random() < abort_ratio
        n = txn_size if abort else min(txn_size, records - stats.committed)
        producer.begin_transaction()
        for _ in range(n):
            order = make_order(seq, rng, base_ms + seq * event_step_ms)
            seq += 1
            payload = json.dumps(order, separators=(",", ":")).encode()
            producer.produce(topic, value=payload, key=order["order_id"].encode())
        producer.flush(60)
        if abort:
            producer.abort_transaction(60)
            stats.aborted += n
            stats.aborted_transactions += 1
        else:
            producer.commit_transaction(60)
            stats.committed += n
        stats.transactions += 1
        if on_progress is not None:
            on_progress(stats)
    return stats


# -- the Spark queries ---------------------------------------------------------------------------


def orders_stream(
    spark: SparkSession, bootstrap: str, *, topic: str = ORDERS, max_offsets: int | None = None
) -> DataFrame:
    """Parsed orders from the oncelog source (read_committed)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("order_id", StringType()),
            StructField("customer", StringType()),
            StructField("amount", DoubleType()),
            StructField("ts", LongType()),
        ]
    )
    reader = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    raw = reader.load()
    return raw.select(F.from_json(F.col("value").cast("string"), schema).alias("o")).select("o.*")


def enrich(orders: DataFrame) -> DataFrame:
    """1:1 enrichment: tax, total and a size class; key = order id."""
    from pyspark.sql import functions as F

    amount = F.col("amount")
    size = F.when(amount < 50, "small").when(amount < 200, "medium").otherwise("large")
    return orders.select(
        F.col("order_id").alias("key"),
        F.to_json(
            F.struct(
                "order_id",
                "customer",
                "amount",
                F.round(amount * TAX_RATE, 2).alias("tax"),
                F.round(amount * (1 + TAX_RATE), 2).alias("total"),
                size.alias("size_class"),
                "ts",
            )
        ).alias("value"),
    )


def window_totals(orders: DataFrame) -> DataFrame:
    """Per-customer totals per event-time window (stateful). Append mode: a window's total
    is emitted once, when the watermark passes the window's end, and its state dropped.

    (Running totals in *update* mode are not possible with a Python data source sink in
    PySpark 4.3: its write builder does not implement SupportsStreamingUpdateAsAppend, so
    Spark rejects ``outputMode("update")`` with "does not support Update mode".)"""
    from pyspark.sql import functions as F

    timed = orders.withColumn("event_time", F.timestamp_millis(F.col("ts"))).withWatermark(
        "event_time", WATERMARK
    )
    agg = timed.groupBy(F.window("event_time", WINDOW).alias("w"), "customer").agg(
        F.count("*").alias("orders"),
        F.sum(F.round(F.col("amount") * 100).cast("long")).alias("amount_cents"),
    )
    return agg.select(
        F.concat_ws("|", "customer", F.date_format("w.start", "yyyy-MM-dd'T'HH:mm:ss")).alias(
            "key"
        ),
        F.to_json(
            F.struct(
                "customer",
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "orders",
                "amount_cents",
            )
        ).alias("value"),
    )


@dataclass
class PipelineConfig:
    bootstrap: str
    checkpoint: str
    orders: str = ORDERS
    enriched: str = ENRICHED
    totals: str = TOTALS
    max_offsets: int | None = 10_000
    available_now: bool = False
    processing_time: str = "0 seconds"
    exactly_once: bool = True
    queries: tuple[str, ...] = ("enrich", "totals")


def start_queries(spark: SparkSession, cfg: PipelineConfig) -> list[StreamingQuery]:
    queries = []
    for name in cfg.queries:
        orders = orders_stream(spark, cfg.bootstrap, topic=cfg.orders, max_offsets=cfg.max_offsets)
        if name == "enrich":
            out, topic, mode = enrich(orders), cfg.enriched, "append"
        elif name == "totals":
            out, topic, mode = window_totals(orders), cfg.totals, "append"
        else:
            raise ValueError(f"unknown query {name!r}")
        writer = (
            out.writeStream.format("oncelog")
            .queryName(f"orders-{name}")
            .outputMode(mode)
            .option("kafka.bootstrap.servers", cfg.bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", str(cfg.exactly_once).lower())
            # The demo SIGKILLs the driver and restarts it: the restart (a JVM start-up)
            # must come back within the prepared transactions' timeout (docs/spark.md).
            .option("transactionTimeoutMs", "300000")
            .option("checkpointLocation", f"{cfg.checkpoint.rstrip('/')}/{name}")
        )
        writer = (
            writer.trigger(availableNow=True)
            if cfg.available_now
            else writer.trigger(processingTime=cfg.processing_time)
        )
        queries.append(writer.start())
    return queries


def create_topics(bootstrap: str, names: Sequence[str], partitions: int) -> None:
    """Create the topics (existing ones are left as they are)."""
    with Admin(ClientConfig(bootstrap)) as admin:
        admin.create_topics(names, partitions)


def run(
    cfg: PipelineConfig, *, master: str = "local[2]", status: Callable[[str], None] | None = None
) -> int:
    """Run the pipeline until it is stopped (or, with available_now, until caught up)."""
    from oncelog.spark import spark_session
    from oncelog.testing import faults

    faults.arm()  # a no-op unless a fault test set a kill point
    spark = spark_session("oncelog-orders-pipeline", master=master)
    queries = start_queries(spark, cfg)
    seen: dict[str, int] = {}
    try:
        while any(q.isActive for q in queries):
            for q in queries:
                p = q.lastProgress
                if p and seen.get(q.name) != p["batchId"]:
                    seen[q.name] = p["batchId"]
                    line = f"progress query={q.name} batch={p['batchId']} rows={p['numInputRows']}"
                    (status or print)(line)
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
            time.sleep(0.5)
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    for q in queries:
        if q.exception() is not None:
            print(f"query {q.name} failed: {q.exception()}", file=sys.stderr)
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m oncelog.demo.pipeline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT[,HOST:PORT]"
    )
    ap.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (one sub-directory per query)"
    )
    ap.add_argument(
        "--master",
        default="local[2]",
        help="Spark master (ignored under spark-submit, which sets its own)",
    )
    ap.add_argument("--orders", default=ORDERS)
    ap.add_argument("--enriched", default=ENRICHED)
    ap.add_argument("--totals", default=TOTALS)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=10_000)
    ap.add_argument(
        "--available-now",
        action="store_true",
        help="process what is there, then stop (Trigger.AvailableNow)",
    )
    ap.add_argument(
        "--processing-time",
        default="0 seconds",
        help="micro-batch interval when running continuously",
    )
    ap.add_argument(
        "--at-least-once",
        action="store_true",
        help="exactlyOnce=false (idempotent producers, no transactions)",
    )
    ap.add_argument("--queries", default="enrich,totals", help="comma list of: enrich, totals")
    ap.add_argument(
        "--create-topics",
        type=int,
        metavar="PARTITIONS",
        default=0,
        help="create the three topics first",
    )
    ap.add_argument(
        "--generate",
        type=int,
        metavar="N",
        default=0,
        help="first write N committed orders (plus aborted ones)",
    )
    args = ap.parse_args(argv)
    if args.create_topics:
        create_topics(args.bootstrap, [args.orders, args.enriched, args.totals], args.create_topics)
    if args.generate:
        stats = generate_orders(args.bootstrap, args.generate, topic=args.orders)
        print(
            f"generated {stats.committed} committed and {stats.aborted} aborted orders", flush=True
        )
    cfg = PipelineConfig(
        bootstrap=args.bootstrap,
        checkpoint=args.checkpoint,
        orders=args.orders,
        enriched=args.enriched,
        totals=args.totals,
        max_offsets=args.max_offsets_per_trigger or None,
        available_now=args.available_now,
        processing_time=args.processing_time,
        exactly_once=not args.at_least_once,
        queries=tuple(q.strip() for q in args.queries.split(",") if q.strip()),
    )
    return run(cfg, master=args.master, status=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
