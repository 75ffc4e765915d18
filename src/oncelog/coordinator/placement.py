"""Kafka's partition-for-key formula: ``Utils.abs(key.hashCode()) % n``.

The transaction coordinator uses it to place a transactional id in ``__transaction_state``
and a consumer group in ``__consumer_offsets``. It must match Java exactly, because clients
and tools compute the same placement: ``String.hashCode`` runs over UTF-16 code units (a
character outside the BMP counts as its two surrogates), and ``Utils.abs(MIN_VALUE)`` is 0.
"""

from __future__ import annotations

from functools import lru_cache

_MASK = 0xFFFFFFFF
_INT_MIN = -0x80000000


def java_string_hashcode(s: str) -> int:
    """``java.lang.String.hashCode()`` as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - 0x100000000 if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``Math.abs`` but maps ``Integer.MIN_VALUE`` to 0."""
    return 0 if n == _INT_MIN else abs(n)


# Cached: every __transaction_state append of a transaction (three per commit) places its
# id again, and the hash walks the id one UTF-16 unit at a time in Python. Bounded, so a
# stream of ever-new ids or groups cannot grow it without limit.
@lru_cache(maxsize=1 << 14)
def partition_for(key: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return java_abs(java_string_hashcode(key)) % num_partitions
