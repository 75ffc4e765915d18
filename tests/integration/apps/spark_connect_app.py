"""A Spark Connect client for the deployment tests: the exactly-once copy of
spark_eos_app.py, run on a Spark Connect server (``SparkSession.builder.remote``).

``--count TOPIC`` first prints ``count TOPIC N`` (a batch read of the topic, read_committed).
Then, unless ``--no-stream``, it starts the streaming copy INPUT -> OUTPUT (exactly-once)
and prints ``started ID RUN_ID`` and ``progress batch=N`` after each micro-batch,
until the query ends. Run in a session of its own, so a test can SIGKILL the client.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True, help="sc://host:port")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--checkpoint")
    ap.add_argument("--input", default="in")
    ap.add_argument("--output", default="out")
    ap.add_argument("--max-offsets", type=int, default=1000)
    ap.add_argument("--available-now", action="store_true")
    ap.add_argument("--count", help="a topic to count with a batch read first")
    ap.add_argument("--no-stream", action="store_true")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    import oncelog.spark

    spark = SparkSession.builder.remote(args.remote).getOrCreate()
    oncelog.spark.register(spark)
    if args.count:
        n = (
            spark.read.format("oncelog")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.count)
            .load()
            .count()
        )
        print(f"count {args.count} {n}", flush=True)
    if args.no_stream:
        return 0
    writer = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("oncelog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", args.checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime="0 seconds")
    )
    q = writer.start()
    print(f"started {q.id} {q.runId}", flush=True)
    seen = -1
    while q.isActive:
        p = q.lastProgress
        if p and p["batchId"] != seen:
            seen = p["batchId"]
            print(f"progress batch={seen}", flush=True)
        time.sleep(0.2)
    if q.exception() is not None:
        print(f"query failed: {q.exception()}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
