"""Which part of a compacted log may be cleaned, and how dirty it is (the rules of
Kafka's LogCleanerManager), as pure functions of a few segment facts.

* Cleanable: whole non-active segments entirely below the first uncleanable
  offset, which is the least of the last stable offset, the active segment's base
  and the base of the first dirty segment younger than ``min.compaction.lag.ms``.
* Dirty ratio: dirty bytes (segments from the first dirty offset to that bound)
  over clean + dirty bytes. A log is due when the ratio reaches
  ``min.cleanable.dirty.ratio``, or when its oldest dirty record is older than
  ``max.compaction.lag.ms``, or (nothing else to do) when a delete horizon stamped
  by an earlier pass has passed, so tombstones and markers can go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .config import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    base_offset: int
    end_offset: int  # next segment's base
    size: int
    largest_timestamp: int
    first_batch_timestamp: int  # -1 if unknown/empty


@dataclass(frozen=True, slots=True)
class Dirtiness:
    first_dirty_offset: int
    end_offset: int  # cleanable range ends here (a segment boundary)
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # max.compaction.lag.ms exceeded

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def cleanable_bytes(self) -> int:
        return self.clean_bytes + self.dirty_bytes


def measure(
    segments: Sequence[SegmentFacts],
    *,
    first_dirty_offset: int,
    last_stable_offset: int,
    active_base: int,
    config: LogConfig,
    now_ms: int,
) -> Dirtiness:
    """``segments``: the non-active segments, oldest first."""
    bound = min(last_stable_offset, active_base)
    if config.min_compaction_lag_ms > 0:
        for seg in segments:
            if seg.end_offset > first_dirty_offset and (
                seg.largest_timestamp > now_ms - config.min_compaction_lag_ms
            ):
                bound = min(bound, seg.base_offset)
                break
    end = first_dirty_offset
    clean = dirty = 0
    overdue = False
    for seg in segments:
        if seg.end_offset > bound:
            break
        end = max(end, seg.end_offset)
        if seg.end_offset <= first_dirty_offset:
            clean += seg.size
            continue
        if dirty == 0 and 0 <= seg.first_batch_timestamp < now_ms - config.max_compaction_lag_ms:
            overdue = True
        dirty += seg.size
    return Dirtiness(first_dirty_offset, end, clean, dirty, overdue)


def is_due(d: Dirtiness, config: LogConfig) -> bool:
    """Dirty enough (or overdue) to be cleaned now."""
    return d.dirty_bytes > 0 and (d.overdue or d.ratio >= config.min_cleanable_dirty_ratio)


def horizon_due(d: Dirtiness, pending_horizon: int | None, now_ms: int) -> bool:
    """An earlier pass left tombstones/markers whose delete horizon has passed."""
    return pending_horizon is not None and pending_horizon <= now_ms and d.cleanable_bytes > 0
