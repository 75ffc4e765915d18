"""When an open transaction is *hanging*: the one rule the web console and
``oncelog transactions find-hanging`` both apply, so they never disagree.

A transaction is open in a partition from its first batch there until its marker. It
holds that partition's last stable offset back, so read_committed consumers stall
behind it. It is hanging when it will not end by itself:

- **overdue**: the coordinator tracks it (the producer's transaction is open there and
  holds this partition), and it has been open longer than its own transaction timeout:
  the coordinator should have aborted it already;
- **orphaned**: the coordinator has no open transaction of that producer holding the
  partition (the marker was lost, or the coordinator's state was), and the producer has
  written nothing for longer than ``transaction.max.timeout.ms``: Kafka's
  ``kafka-transactions.sh find-hanging`` case (KIP-664).

Pure: times are passed in, in milliseconds.
"""

from __future__ import annotations

OVERDUE = "overdue"
ORPHANED = "orphaned"

REASONS = {
    OVERDUE: "open longer than its transaction timeout; the coordinator should have aborted it",
    ORPHANED: (
        "open in the partition, but the coordinator has no open transaction of its producer there"
    ),
}


def hanging_kind(
    *,
    tracked: bool,
    txn_age_ms: int,
    txn_timeout_ms: int,
    producer_idle_ms: int,
    max_timeout_ms: int,
) -> str | None:
    """``OVERDUE``, ``ORPHANED``, or None when the transaction is not hanging.

    ``tracked``: the coordinator has the producer's transaction open and holding this
    partition; ``txn_age_ms`` / ``txn_timeout_ms``: that transaction's age and timeout;
    ``producer_idle_ms``: how long since the producer's last write to the partition."""
    if tracked:
        return OVERDUE if txn_age_ms > txn_timeout_ms else None
    return ORPHANED if producer_idle_ms > max_timeout_ms else None
