"""The pure parts of oncelog's producer: the record accumulator (batches, sequences,
send rounds) and Java's partitioner (no broker)."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from oncelog.client.batching import (
    MAX_SEQUENCE,
    Accumulator,
    SealedBatch,
    next_sequence,
    record_size,
)
from oncelog.client.partitioner import StickyPartitioner, murmur2, partition_for_key
from oncelog.client.producer import ProducerSettings
from oncelog.records.builder import decode_batch
from oncelog.records.compression import CompressionType

A, B = ("out", 0), ("out", 1)


def decoded(batch: SealedBatch) -> tuple[int, int, int, bool, list[bytes | None]]:
    header, records = decode_batch(batch.data)
    return (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.is_transactional,
        [r.value for r in records],
    )


def fill(acc: Accumulator, tp: tuple[str, int], values: list[bytes]) -> list[bool]:
    return [acc.append(tp, None, v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)]


def test_batches_are_sealed_at_batch_size_with_consecutive_sequences() -> None:
    one = record_size(None, b"v-000", ())
    acc = Accumulator(batch_size=61 + 3 * one)  # three records per batch
    acc.reset(producer_id=7, producer_epoch=2)
    values = [b"v-%03d" % i for i in range(10)]
    sealed = fill(acc, A, values)
    assert sealed == [False, False, True] * 3 + [False]
    acc.seal_all()
    batches = []
    while acc.pending():
        (head,) = acc.round(1 << 20)
        batches.append(head)
        acc.acknowledged(head)
    assert [(b.base_sequence, b.count) for b in batches] == [(0, 3), (3, 3), (6, 3), (9, 1)]
    assert [decoded(b)[:4] for b in batches] == [(7, 2, s, True) for s in (0, 3, 6, 9)]
    assert [v for b in batches for v in decoded(b)[4]] == values
    assert acc.sequence(A) == 10 and acc.sealed_bytes == 0 and acc.records == 10


def test_a_round_takes_one_head_batch_per_partition_and_a_retry_resends_the_same_bytes() -> None:
    acc = Accumulator(batch_size=61 + record_size(None, b"x", ()))  # one record per batch
    acc.reset(1, 0)
    fill(acc, A, [b"a", b"b"])
    fill(acc, B, [b"c"])
    first = acc.round(1 << 20)
    assert [(b.partition, b.base_sequence) for b in first] == [(0, 0), (1, 0)]
    # Nothing acknowledged (a lost answer, NOT_LEADER_OR_FOLLOWER): the same objects again,
    # never the partition's second batch ahead of its first.
    again = acc.round(1 << 20)
    assert [b is c for b, c in zip(first, again, strict=True)] == [True, True]
    acc.acknowledged(first[1])
    with pytest.raises(ValueError, match="not the head"):
        acc.acknowledged(acc._sealed[A][1])
    acc.acknowledged(first[0])
    (last,) = acc.round(1 << 20)
    assert (last.partition, last.base_sequence, decoded(last)[4]) == (0, 1, [b"b"])
    # Partitions to skip, and the byte bound (at least one batch per round).
    fill(acc, B, [b"d"])
    assert [b.partition for b in acc.round(1 << 20, exclude=[A])] == [1]
    assert len(acc.round(1)) == 1


def test_a_new_identity_restarts_sequences_and_discard_rolls_back_to_the_unacknowledged() -> None:
    acc = Accumulator(batch_size=61 + record_size(None, b"x", ()))
    acc.reset(1, 0)
    fill(acc, A, [b"a", b"b", b"c"])
    acc.acknowledged(acc.round(1 << 20)[0])  # sequence 0 reached the broker
    acc.discard()  # an abort: sequences 1 and 2 never did
    assert not acc.buffered() and acc.sequence(A) == 1
    fill(acc, A, [b"d"])
    assert acc.round(1 << 20)[0].base_sequence == 1
    acc.reset(1, 1)  # transaction version 2: EndTxn bumped the epoch
    assert not acc.buffered() and acc.sequence(A) == 0
    fill(acc, A, [b"e"])
    assert decoded(acc.round(1 << 20)[0])[:3] == (1, 1, 0)


def test_a_failed_batch_drops_its_partitions_queue() -> None:
    acc = Accumulator(batch_size=61 + record_size(None, b"x", ()))
    acc.reset(1, 0)
    fill(acc, A, [b"a", b"b", b"c"])
    fill(acc, B, [b"d"])
    acc.acknowledged(acc.round(1 << 20)[0])  # A: sequence 0 written
    acc.drop(A)  # sequence 1 failed for good (e.g. MESSAGE_TOO_LARGE): 1 and 2 go
    assert [b.partition for b in acc.round(1 << 20)] == [1]
    assert acc.sequence(A) == 1 and acc.sealed_bytes == len(acc.round(1 << 20)[0].data)


def test_sequences_wrap_after_int_max_as_in_kafka() -> None:
    assert next_sequence(0, 5) == 5
    assert next_sequence(MAX_SEQUENCE - 5, 5) == MAX_SEQUENCE
    assert next_sequence(MAX_SEQUENCE - 1, 3) == 1  # MAX-1, MAX, 0 -> next is 1
    assert next_sequence(MAX_SEQUENCE, 1) == 0
    acc = Accumulator()
    acc.reset(1, 0)
    acc._sequences[A] = MAX_SEQUENCE - 1
    fill(acc, A, [b"a", b"b", b"c"])
    acc.seal_all()
    assert acc.round(1 << 20)[0].base_sequence == MAX_SEQUENCE - 1 and acc.sequence(A) == 1


def test_compressed_batches_and_headers_round_trip() -> None:
    for codec in CompressionType:
        acc = Accumulator(compression=codec)
        acc.reset(3, 4)
        acc.append(A, b"k", b"v" * 1000, (("h", b"1"), ("nil", None)), 5)
        acc.seal_all()
        (batch,) = acc.round(1 << 20)
        header, records = decode_batch(batch.data)
        assert header.compression == codec
        assert (records[0].key, records[0].value, records[0].headers) == (
            b"k",
            b"v" * 1000,
            (("h", b"1"), ("nil", None)),
        )
        if codec != CompressionType.NONE:
            assert len(batch.data) < 1000


def test_murmur2_is_javas() -> None:
    # Kafka's UtilsTest vectors, and kafka-python's port of Java's murmur2 as an oracle.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"abc") == 479470107
    rng = random.Random(7)
    for n in range(300):
        key = rng.randbytes(n % 41)
        java = kafka_python_murmur2(key)
        assert murmur2(key) & 0xFFFFFFFF == java & 0xFFFFFFFF
        assert partition_for_key(key, 7) == (java & 0x7FFFFFFF) % 7


def test_sticky_partitioner() -> None:
    picks = iter([2, 0])
    p = StickyPartitioner(rng=lambda n: next(picks))
    assert {p.partition("t", None, 3) for _ in range(5)} == {2}
    assert p.partition("t", b"key", 3) == partition_for_key(b"key", 3)
    p.batch_sealed("t", 1)  # another partition's batch: unkeyed records stay
    assert p.partition("t", None, 3) == 2
    p.batch_sealed("t", 2)
    assert p.partition("t", None, 3) == 0


def test_producer_settings_from_librdkafka_names() -> None:
    s = ProducerSettings.from_conf(
        {"batch.size": "65536", "compression.type": "ZSTD", "message.timeout.ms": "30000"}
    )
    assert (s.batch_size, s.compression, s.delivery_timeout_s) == (
        65536,
        CompressionType.ZSTD,
        30.0,
    )
    assert (
        ProducerSettings.from_conf({"compression.codec": "lz4"}).compression == CompressionType.LZ4
    )
    assert ProducerSettings.from_conf({}) == ProducerSettings()
    with pytest.raises(ValueError, match="compression.type"):
        ProducerSettings.from_conf({"compression.type": "brotli"})
