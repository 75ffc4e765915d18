"""The transactional copier of copier.py with transaction version 2 on the producer side
(oncelog.testing.raw_txn: Produce v12 implicit adds, TxnOffsetCommit v5, an epoch bump per
EndTxn v5); the consumer side stays confluent-kafka, read_committed, assign()-based.

Every path that restarts, aborts or gives up prints one line, and a watchdog prints the
stage it found stuck before it exits (code 4), so a hang is diagnosable from the log. Each
EndTxn prints ``end commit|abort PID EPOCH -> PID EPOCH`` and each start ``init PID EPOCH``,
which the test reads to check that every transaction bumped the epoch.

Run as a process so tests can SIGKILL it. Exits 0 once the input is fully copied.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from oncelog.client.errors import ClientError
from oncelog.testing.raw_txn import RawTransactionalProducer, is_fatal


def say(*parts: object) -> None:
    print(*parts, flush=True)


class Watchdog(threading.Thread):
    """Exits the process when one stage lasts longer than ``limit_s``, naming the stage.
    Entering the stage the copier is already in does not reset the clock, so a loop that
    makes no progress (idle consumes with all the input already there) trips it too."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(daemon=True)
        self.limit_s = limit_s
        self.stage = "start"
        self.since = time.monotonic()

    def enter(self, stage: str) -> None:
        if stage != self.stage:
            self.stage, self.since = stage, time.monotonic()

    def run(self) -> None:
        while True:
            time.sleep(1.0)
            stuck = time.monotonic() - self.since
            if stuck > self.limit_s:
                say(f"watchdog: stage {self.stage!r} stuck for {stuck:.0f} s, exiting")
                os._exit(4)


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
    ap.add_argument("--watchdog-s", type=float, default=60.0)
    args = ap.parse_args()
    rng = random.Random(args.seed or None)
    watchdog = Watchdog(args.watchdog_s)
    watchdog.start()
    tp = TopicPartition(args.input, args.partition)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    producer = RawTransactionalProducer(args.bootstrap, f"copier-tv2-{args.partition}")
    watchdog.enter("init_transactions")
    pid, epoch = producer.init_transactions()
    say(f"init {pid} {epoch}")

    def rewind() -> int:
        watchdog.enter("rewind")
        committed = consumer.committed([tp], timeout=30)[0].offset
        start = committed if committed >= 0 else 0
        consumer.assign([TopicPartition(args.input, args.partition, start)])
        return start

    def end(commit: bool) -> None:
        watchdog.enter("commit" if commit else "abort")
        before = (producer.producer_id, producer.epoch)
        after = producer.commit_transaction() if commit else producer.abort_transaction()
        say(
            f"end {'commit' if commit else 'abort'} {before[0]} {before[1]} -> {after[0]} {after[1]}"
        )

    # Our own position: librdkafka's position() stays OFFSET_INVALID (-1001) while a
    # partition assigned at its end offset has returned nothing, so a copier restarted after
    # its last commit would never see that it is done.
    position = rewind()
    say(f"start at {position}")
    watchdog.enter("watermarks")
    _, end_offset = consumer.get_watermark_offsets(tp, timeout=30)
    behind = 0  # idle checks at the end of the input with the committed offset behind
    while True:
        watchdog.enter("consume")
        msgs = [m for m in consumer.consume(args.batch, 0.5) if not m.error()]
        if not msgs:
            if position >= end_offset:
                watchdog.enter("committed")
                committed = consumer.committed([tp], timeout=30)[0].offset
                if committed >= end_offset:
                    say(f"done: committed {committed}")
                    return 0
                behind += 1
                if behind >= 20:  # see copier.py: report it, the supervisor restarts us
                    say(f"stuck: position {position} at end {end_offset}, committed {committed}")
                    return 5
            continue
        behind = 0
        try:
            watchdog.enter("send")
            producer.begin_transaction()
            producer.send(args.output, args.partition, [(m.key(), m.value()) for m in msgs])
            watchdog.enter("send_offsets")
            next_offset = msgs[-1].offset() + 1
            producer.send_offsets_to_transaction(
                {(args.input, args.partition): next_offset}, args.group
            )
            if rng.random() < args.abort_ratio:
                end(commit=False)
                position = rewind()
                say(f"random abort, rewound to {position}")
                continue
            end(commit=True)
            position = next_offset
        except ClientError as exc:
            if is_fatal(exc):
                say(f"fatal: {exc}")
                return 3
            say(f"abortable: {exc}; aborting and rewinding")
            try:
                end(commit=False)
            except ClientError as again:
                say(f"abort failed: {again}")
                return 3
            position = rewind()
            say(f"rewound to {position}")
        except KafkaException as exc:
            say(f"consumer error: {exc}")
            return 6


if __name__ == "__main__":
    sys.exit(main())
