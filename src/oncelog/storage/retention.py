"""Which old segments retention may delete: always a prefix of the log (Kafka's rules).

Each rule counts deletable segments from the oldest and stops at the first one
it must keep. Like Kafka (single node: the high watermark is the log end) the
active segment counts too unless it is empty; the log rolls before deleting it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import LogConfig
from .segment import LogSegment


def _deletable(segments: Sequence[LogSegment], i: int) -> bool:
    return not (i == len(segments) - 1 and segments[i].size == 0)


def start_breached(segments: Sequence[LogSegment], log_start_offset: int) -> int:
    """Segments wholly below the log start (DeleteRecords moved it past them)."""
    n = 0
    while n + 1 < len(segments) and segments[n + 1].base_offset <= log_start_offset:
        n += 1
    return n


def time_breached(segments: Sequence[LogSegment], config: LogConfig, now_ms: int) -> int:
    """retention.ms: segments whose largest timestamp is older than the limit."""
    if not config.delete_enabled or config.retention_ms < 0:
        return 0
    n = 0
    while (
        n < len(segments)
        and _deletable(segments, n)
        and now_ms - segments[n].largest_timestamp() > config.retention_ms
    ):
        n += 1
    return n


def size_breached(segments: Sequence[LogSegment], config: LogConfig) -> int:
    """retention.bytes: drop segments while what remains stays at least the limit."""
    if not config.delete_enabled or config.retention_bytes < 0:
        return 0
    excess = sum(seg.size for seg in segments) - config.retention_bytes
    n = 0
    while n < len(segments) and _deletable(segments, n) and excess >= segments[n].size:
        excess -= segments[n].size
        n += 1
    return n
