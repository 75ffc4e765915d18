"""Offsets of the ``oncelog`` source (pure: no Spark, no sockets).

Spark stores a source's offset as JSON. Ours is Spark's Kafka format: the *next* offset to
read per topic-partition, ``{"topic": {"0": 23, "1": 7}}``. Spark compares offsets by their
JSON text, so every offset this module emits is canonical: topics sorted, partitions in
numeric order.
"""

from __future__ import annotations

from collections.abc import Mapping

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    if not data:
        return {}
    out: Offsets = {}
    for topic, parts in data.items():
        for partition, offset in parts.items():
            out[(topic, int(partition))] = int(offset)
    return out


def distribute(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], limit: int
) -> Offsets:
    """Cap the range start..end at ``limit`` offsets in total.

    Every partition with a backlog first gets one offset (so none starves while a big one
    drains), the rest of the budget is split in proportion to the remaining backlogs
    (largest remainder). The total is exactly ``min(limit, backlog)``: every micro-batch is
    bounded. Partitions missing from ``start`` have no backlog and keep their end offset.
    """
    if limit <= 0:
        raise ValueError("limit must be positive")
    sizes = {tp: end[tp] - start[tp] for tp in end if tp in start and end[tp] > start[tp]}
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    if limit < len(sizes):
        # Fewer offsets than partitions with a backlog: one each to the biggest backlogs.
        chosen = sorted(sizes, key=lambda tp: (-sizes[tp], tp))[:limit]
        alloc = {tp: (1 if tp in chosen else 0) for tp in sizes}
    else:
        alloc = dict.fromkeys(sizes, 1)
        budget = limit - len(sizes)
        rest = {tp: size - 1 for tp, size in sizes.items()}
        rest_total = sum(rest.values())
        remainders: list[tuple[int, int, TopicPartition]] = []
        for tp, size in rest.items():
            quota, remainder = divmod(budget * size, rest_total)
            alloc[tp] += quota
            remainders.append((-remainder, -size, tp))
        left = limit - sum(alloc.values())
        for _, _, tp in sorted(remainders)[:left]:
            alloc[tp] += 1
    out = dict(end)
    for tp, n in alloc.items():
        out[tp] = start[tp] + n
    return out


Range = tuple[str, int, int, int]  # topic, partition, start, end (exclusive)


def split_ranges(
    ranges: list[Range], min_partitions: int | None, max_records: int | None
) -> list[Range]:
    """Spark partitions for offset ranges: first cut every range into pieces of at most
    ``max_records`` offsets (maxRecordsPerPartition); then, while there are fewer pieces
    than ``min_partitions``, split the ranges in proportion to their size, as Spark's
    KafkaOffsetRangeCalculator does (a range of size s gets ceil(s / total * minPartitions)
    parts of near-equal size). Order: by topic, partition, start."""
    out: list[Range] = []
    for topic, partition, start, end in ranges:
        step = max_records or max(1, end - start)
        out += [(topic, partition, a, min(a + step, end)) for a in range(start, end, step)]
    if min_partitions is not None and 0 < len(out) < min_partitions:
        total = sum(end - start for _, _, start, end in out)
        split: list[Range] = []
        for topic, partition, start, end in out:
            size = end - start
            parts = min(size, max(1, -(-size * min_partitions // total)))
            bounds = [start + size * i // parts for i in range(parts + 1)]
            split += [
                (topic, partition, a, z) for a, z in zip(bounds, bounds[1:], strict=False) if z > a
            ]
        out = split
    return sorted(out)


def group_ranges(ranges: list[Range], max_groups: int | None) -> list[list[Range]]:
    """At most ``max_groups`` groups of ranges (maxPartitions), each read by one task: the
    largest range first onto the group with the fewest offsets so far (ties: the first),
    ranges in a group in (topic, partition, start) order. None, or no more ranges than
    groups: one range per group."""
    if max_groups is None or len(ranges) <= max_groups:
        return [[r] for r in sorted(ranges)]
    groups: list[list[Range]] = [[] for _ in range(max_groups)]
    load = [0] * max_groups
    for r in sorted(ranges, key=lambda r: (r[2] - r[3], r)):
        i = load.index(min(load))
        groups[i].append(r)
        load[i] += r[3] - r[2]
    return [sorted(g) for g in groups]
