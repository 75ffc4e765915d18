"""Partition directories under a data dir, named ``<topic>-<partition>`` as in Kafka."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def partition_dir_name(topic: str, partition: int) -> str:
    if partition < 0:
        raise ValueError(f"negative partition {partition}")
    return f"{topic}-{partition}"


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return data_dir / partition_dir_name(topic, partition)


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory name, None if it is not one.

    Topic names may contain '-', so the partition is what follows the last one.
    """
    topic, sep, index = name.rpartition("-")
    if not sep or not topic or not index.isdigit() or (len(index) > 1 and index[0] == "0"):
        return None
    return topic, int(index)


def partition_dir_names(data_dir: Path) -> list[tuple[str, int, str]]:
    """(topic, partition, directory name) of every ``<topic>-<partition>`` directory
    directly under ``data_dir``, sorted by name.

    One ``scandir``: the entries' types come with the listing, so 20,000 partitions
    cost no stat each, and names (not Paths) are parsed and sorted."""
    try:
        with os.scandir(data_dir) as entries:
            found = sorted(
                (entry.name, parsed)
                for entry in entries
                if (parsed := parse_partition_dir_name(entry.name)) is not None and entry.is_dir()
            )
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [(topic, partition, name) for name, (topic, partition) in found]


def iter_partition_dirs(data_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """Every ``<topic>-<partition>`` directory directly under ``data_dir``, by name."""
    for topic, partition, name in partition_dir_names(data_dir):
        yield topic, partition, data_dir / name
