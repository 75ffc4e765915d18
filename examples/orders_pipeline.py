"""Example: an exactly-once orders pipeline on Spark with the oncelog data source.

    orders ──[oncelog source, read_committed]──> enrich (tax, total, size class) ──[oncelog sink,
    exactly-once]──> orders-enriched
           └──> per-customer totals per 1-minute event-time window (watermark 1 minute,
                append mode) ──[oncelog sink, exactly-once]──> order-totals

The orders come from a transactional generator that aborts about a fifth of its
transactions: aborted orders never reach Spark (read_committed), and every committed order
appears in orders-enriched exactly once, even if the driver is killed and restarted from
its checkpoint. The code of the queries is in ``oncelog.demo.pipeline``.

Against any Kafka-protocol cluster (oncelog or Apache Kafka, PLAINTEXT listener):

    # 1. topics and some input (50000 committed orders, plus aborted ones)
    .venv/bin/python examples/orders_pipeline.py --bootstrap HOST:PORT --checkpoint /tmp/orders-ck \\
        --create-topics 3 --generate 50000 --available-now

    # 2. or keep it running (micro-batches as orders arrive); Ctrl-C / kill -9 and rerun at will
    .venv/bin/python examples/orders_pipeline.py --bootstrap HOST:PORT --checkpoint /tmp/orders-ck

    # 3. the same with spark-submit (no --packages: the data source is pure Python)
    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        examples/orders_pipeline.py --bootstrap HOST:PORT --checkpoint /tmp/orders-ck --available-now

Or let ``python -m oncelog.demo`` do it all on an embedded broker, with a driver SIGKILL
in the middle and an independent exactly-once check at the end.
"""

from __future__ import annotations

import sys

from oncelog.demo.pipeline import main

if __name__ == "__main__":
    sys.exit(main())
