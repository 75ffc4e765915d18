"""Partition directories under a data dir, named ``<topic>-<partition>`` as in Kafka."""

from __future__ import annotations

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


def iter_partition_dirs(data_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """Every ``<topic>-<partition>`` directory directly under ``data_dir``."""
    if not data_dir.is_dir():
        return
    for child in sorted(data_dir.iterdir()):
        parsed = parse_partition_dir_name(child.name) if child.is_dir() else None
        if parsed is not None:
            yield parsed[0], parsed[1], child
