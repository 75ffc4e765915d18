"""A KIP-447 consume-transform-produce instance: one transactional producer per
process, partitions assigned by the consumer group, offsets committed with
send_offsets_to_transaction(offsets, consumer_group_metadata()).

Usage: eos_app.py BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [--txn-sleep S] [--group-protocol P]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("group")
    ap.add_argument("txn_id")
    ap.add_argument("--txn-sleep", type=float, default=0.0, help="pause inside each transaction")
    ap.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="consumer: KIP-848, whose timeouts the broker sets",
    )
    args = ap.parse_args()
    timeouts: dict[str, object] = (
        {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
        if args.group_protocol == "classic"
        else {}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "group.protocol": args.group_protocol,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **timeouts,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.txn_id,
            "linger.ms": 5,
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([args.input])

    def rewind() -> None:
        assigned = consumer.assignment()
        if assigned:
            for tp in consumer.committed(assigned, timeout=30):
                consumer.seek(
                    TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0)
                )

    while True:
        msgs = [m for m in consumer.consume(500, 0.5) if not m.error()]
        if not msgs:
            continue
        # The group generation these records were fetched under (KIP-447): a zombie that
        # lost its partitions meanwhile must have its offsets rejected.
        group_metadata = consumer.consumer_group_metadata()
        try:
            producer.begin_transaction()
            positions: dict[int, int] = {}
            for m in msgs:
                producer.produce(args.output, key=m.key(), value=m.value(), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
            if args.txn_sleep:
                print("IN_TXN", file=sys.stderr, flush=True)
                time.sleep(args.txn_sleep)
            watchdog = threading.Timer(45, os._exit, (4,))  # librdkafka#5456: the call may hang
            watchdog.start()
            try:
                producer.send_offsets_to_transaction(
                    [TopicPartition(args.input, p, o) for p, o in positions.items()],
                    group_metadata,
                    30,
                )
            finally:
                watchdog.cancel()
            producer.commit_transaction(30)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            print(f"transaction failed: {err.name()}: {err}", file=sys.stderr, flush=True)
            if err.fatal():
                return 3
            try:
                producer.abort_transaction(30)
            except KafkaException as abort_exc:
                print(f"abort failed: {abort_exc}", file=sys.stderr, flush=True)
                return 3
            rewind()


if __name__ == "__main__":
    sys.exit(main())
