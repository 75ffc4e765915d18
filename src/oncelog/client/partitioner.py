"""Java's default partitioner for oncelog's own producer (pure: no I/O).

A keyed record goes to ``toPositive(murmur2(key)) % partitions``, as in Kafka's Java
producer, Spark's Kafka sink and librdkafka's ``murmur2_random``, so the same key lands on
the same partition whichever of them wrote it. A record without a key goes to a *sticky*
partition (chosen at random, kept until the producer seals a batch for it), as the Java
producer does since KIP-480, so unkeyed records fill whole batches.
"""

from __future__ import annotations

import random
from collections.abc import Callable

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit MurmurHash2 of ``data`` as Kafka's ``Utils.murmur2`` computes it, as a signed
    int32 (the Java value)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Keyed records by murmur2; unkeyed ones to one random partition per topic until
    :meth:`batch_sealed` names that partition."""

    def __init__(self, rng: Callable[[int], int] | None = None) -> None:
        self._rng = rng or random.Random().randrange
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, partitions)
        p = self._sticky.get(topic)
        if p is None or p >= partitions:
            p = self._sticky[topic] = self._rng(partitions)
        return p

    def batch_sealed(self, topic: str, partition: int) -> None:
        """A batch of ``topic``-``partition`` is full: unkeyed records move on."""
        if self._sticky.get(topic) == partition:
            del self._sticky[topic]
