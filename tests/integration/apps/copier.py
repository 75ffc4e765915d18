"""A transactional copier, after Kafka's system test: consume one input partition,
copy each record to the same output partition, commit the input offsets inside the
transaction, and abort about one transaction in three at random.

Run as a process so tests can SIGKILL it. Exits 0 once the input is fully copied.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def say(text: str) -> None:
    """One line in the copier's log: a copier that stops making progress must say where."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def abort_quietly(producer: Producer) -> None:
    """Abort whatever is open; 'no transaction in progress' is fine."""
    for _ in range(20):
        try:
            producer.abort_transaction(30)
            return
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            say(f"abort: {err}")
            if err.fatal():
                raise
            if not err.retriable():
                return
            time.sleep(0.2)


def watchdog(seconds: float, what: str) -> threading.Timer:
    """librdkafka can block forever after a broker restart, ignoring the call's timeout
    (confluentinc/librdkafka#5456, #5511): say so and exit, so the supervisor restarts us."""

    def expire() -> None:
        say(f"watchdog: {what} still blocked after {seconds:.0f} s; exiting")
        os._exit(4)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--partition", type=int, required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--abort-ratio", type=float, default=1 / 3)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--client-config", action="append", default=[], help="KEY=VALUE for both clients (security)"
    )
    args = ap.parse_args()
    security = dict(item.split("=", 1) for item in args.client_config)
    rng = random.Random(args.seed or None)
    tp = TopicPartition(args.input, args.partition)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **security,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"copier-{args.partition}",
            "linger.ms": 5,
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
            **({"debug": os.environ["COPIER_DEBUG"]} if os.environ.get("COPIER_DEBUG") else {}),
            **security,
        }
    )
    say(f"start: pid {os.getpid()}")
    producer.init_transactions(60)

    def rewind() -> int:
        committed = consumer.committed([TopicPartition(args.input, args.partition)], timeout=30)[
            0
        ].offset
        start = committed if committed >= 0 else 0
        say(f"rewind to {start}")
        consumer.assign([TopicPartition(args.input, args.partition, start)])
        return start

    def current_position() -> int:
        # librdkafka reports no position (OFFSET_INVALID) until a message is consumed from
        # the assignment, so a copier restarted with everything committed never sees one:
        # until then its position is where it was assigned.
        offset: int = consumer.position([tp])[0].offset
        return offset if offset >= 0 else assigned

    assigned = rewind()
    _, end = consumer.get_watermark_offsets(tp, timeout=30)
    idle = 0  # empty polls in a row
    behind = 0  # idle checks at the end of the input with the committed offset behind
    while True:
        polled = consumer.consume(args.batch, 0.5)
        for m in polled:
            if m.error():
                say(f"consume: {m.error()}")
        msgs = [m for m in polled if not m.error()]
        if not msgs:
            position = current_position()
            idle += 1
            if idle % 20 == 0:
                say(f"idle: position {position}, end {end}")
            if position >= end:
                committed = consumer.committed([tp], timeout=30)[0].offset
                if committed >= end:
                    return 0
                # Every path that moves the position past the committed offset either
                # commits it or rewinds, so this state must not last: report it and exit,
                # and the supervisor restarts from the committed offset (a lost offset
                # commit then shows up as duplicates in the output, not as a hang).
                behind += 1
                if behind >= 20:
                    say(f"stuck: position {position} at end {end}, committed {committed}")
                    return 5
            continue
        behind = idle = 0
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(
                    args.output, key=m.key(), value=m.value(), partition=args.partition
                )
            next_offset = msgs[-1].offset() + 1
            timer = watchdog(45, "send_offsets_to_transaction")
            try:
                producer.send_offsets_to_transaction(
                    [TopicPartition(args.input, args.partition, next_offset)],
                    consumer.consumer_group_metadata(),
                    30,
                )
            finally:
                timer.cancel()
            if rng.random() < args.abort_ratio:
                producer.abort_transaction(30)
                say(f"aborted {msgs[0].offset()}..{next_offset}")
                assigned = rewind()
                continue
            timer = watchdog(120, "commit_transaction")
            try:
                while True:
                    try:
                        producer.commit_transaction(30)
                        break
                    except KafkaException as exc:
                        say(f"commit: {exc.args[0]}")
                        if exc.args[0].retriable():
                            time.sleep(0.2)
                            continue
                        raise
            finally:
                timer.cancel()
            say(f"committed {msgs[0].offset()}..{next_offset}")
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            say(f"error: {err}")
            if err.fatal():
                return 3
            abort_quietly(producer)
            assigned = rewind()


if __name__ == "__main__":
    sys.exit(main())
