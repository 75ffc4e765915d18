"""A Spark driver for the exactly-once kill tests: copy a topic 1:1 with the oncelog sink.

Run as ``python -m tests.integration.apps.spark_eos_app --bootstrap ... --checkpoint ...``
in a session of its own (``start_new_session=True``) so that a kill point
(ONCELOG_SPARK_KILL_AT) or the test can SIGKILL the whole driver: Python, JVM, workers.
Prints ``progress batch=N rows=M`` after each micro-batch.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--input", default="in")
    ap.add_argument("--output", default="out")
    ap.add_argument("--max-offsets", type=int, default=1000)
    ap.add_argument("--available-now", action="store_true")
    ap.add_argument("--transaction-timeout-ms", type=int, default=0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--sink-option", action="append", default=[], help="key=value")
    args = ap.parse_args(argv)

    from oncelog.spark import spark_session
    from oncelog.spark.hooks import trace
    from oncelog.testing import faults

    faults.arm()
    trace("driver app starting Spark")
    spark = spark_session("oncelog-eos-test", master=args.master)
    trace("Spark session ready")
    df = (
        spark.readStream.format("oncelog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
    )
    writer = df.selectExpr("key", "value").writeStream.format("oncelog")
    writer = writer.option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output)
    if args.transaction_timeout_ms:
        writer = writer.option("transactionTimeoutMs", str(args.transaction_timeout_ms))
    for item in args.sink_option:
        key, _, value = item.partition("=")
        writer = writer.option(key, value)
    writer = writer.option("checkpointLocation", args.checkpoint)
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime="0 seconds")
    )
    q = writer.start()
    trace("query started")
    seen = -1
    while q.isActive:
        p = q.lastProgress
        if p and p["batchId"] != seen:
            seen = p["batchId"]
            print(f"progress batch={seen} rows={p['numInputRows']}", flush=True)
        time.sleep(0.2)
    if q.exception() is not None:
        print(f"query failed: {q.exception()}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
