"""A consumer-group member: records every message it processes, then commits it.

Usage: group_member.py BOOTSTRAP TOPIC GROUP OUTFILE. SIGTERM leaves the group cleanly.
"""

from __future__ import annotations

import signal
import sys

from confluent_kafka import Consumer


def main() -> int:
    bootstrap, topic, group, outfile = sys.argv[1:5]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    consumer.subscribe([topic])
    with open(outfile, "a") as out:
        while running[0]:
            for msg in consumer.consume(100, 0.2):
                if msg.error():
                    continue
                out.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")  # type: ignore[union-attr]
                out.flush()
                consumer.commit(message=msg, asynchronous=False)
    consumer.close()  # leaves the group: the others rebalance at once
    return 0


if __name__ == "__main__":
    sys.exit(main())
