"""The broker's test-hook settings (``oncelog.debug.*``), declared in one place.

Each is off by default; the broker installs the hooks of those that are set into the one
hook registry (``oncelog.hooks``) when it starts and removes them when it stops, so
product code only marks named points. A fault test starts a broker process with these
settings; the hooks are small enough to live here (the broker never imports
``oncelog.testing``), while the Spark kill points' hooks are ``oncelog.testing``'s.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.config.config_def import Importance
from oncelog.config.errors import ConfigException
from oncelog.config.typed import setting
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.hooks import Hook

_G = "testing"
HOLD_POLL_S = 0.01


def parse_load_failures(text: str) -> dict[int, int]:
    """``P:N,...`` (``P`` alone: ``P:1``) as partition -> attempts that fail; ValueError
    naming the malformed item otherwise."""
    out: dict[int, int] = {}
    for item in text.split(","):
        if item.strip():
            partition, _, count = item.strip().partition(":")
            try:
                out[int(partition)] = int(count or 1)
            except ValueError:
                raise ValueError(
                    f"expected PARTITION[:ATTEMPTS] items separated by commas, got {item!r}"
                ) from None
    return out


def _check_load_failures(name: str, value: object) -> None:
    try:
        parse_load_failures(str(value))
    except ValueError as exc:
        raise ConfigException(name, value, str(exc)) from None


@dataclass(frozen=True, slots=True)
class DebugSettings:
    flush_hold_file: str = setting(
        "oncelog.debug.flush.hold.file",
        "",
        "Test hook: while this file exists, every fdatasync of oncelog.flush.on.ack waits.",
        importance=Importance.LOW,
        group=_G,
    )
    cleaner_cleaned_delay_ms: int = setting(
        "oncelog.debug.cleaner.cleaned.delay.ms",
        0,
        "Test hook: a pass pauses this long once a group's .cleaned files are written.",
        importance=Importance.LOW,
        group=_G,
    )
    cleaner_swap_delay_ms: int = setting(
        "oncelog.debug.cleaner.swap.delay.ms",
        0,
        "Test hook: a pass pauses this long once a group is staged as .swap.",
        importance=Importance.LOW,
        group=_G,
    )
    # To crash a test broker while a transaction is in PrepareCommit/PrepareAbort.
    marker_delay_ms: int = setting(
        "oncelog.debug.marker.delay.ms",
        0,
        "Test hook: transaction markers are held back this long.",
        group=_G,
    )
    group_load_partition_delay_ms: int = setting(
        "oncelog.debug.group.load.partition.delay.ms",
        0,
        "Test hook: each __consumer_offsets partition's load waits this long before it starts.",
        group=_G,
    )
    group_load_fail: str = setting(
        "oncelog.debug.group.load.fail",
        "",
        "Test hook: P:N[,P:N...] makes the first N load attempts of partition P fail.",
        validator=_check_load_failures,
        group=_G,
    )

    def hooks(self) -> dict[str, Hook]:
        """The hooks these settings ask for, by point name (none by default)."""
        out: dict[str, Hook] = {}
        if self.flush_hold_file:
            out["group_sync.fsync"] = _hold_while_exists(self.flush_hold_file)
        cleaner = {"cleaned": self.cleaner_cleaned_delay_ms, "swap": self.cleaner_swap_delay_ms}
        if any(cleaner.values()):
            out["cleaner.stage"] = lambda *, stage: cleaner.get(stage, 0)
        if self.marker_delay_ms:
            delay = self.marker_delay_ms
            out["txn.markers"] = lambda: delay
        failures = parse_load_failures(self.group_load_fail)
        if self.group_load_partition_delay_ms or failures:
            out["coordinator.load"] = _GroupLoad(self.group_load_partition_delay_ms, failures)
        return out


def _hold_while_exists(path: str) -> Hook:
    def hold(**_: object) -> None:
        while os.path.exists(path):
            time.sleep(HOLD_POLL_S)

    return hold


class _GroupLoad:
    """Each ``__consumer_offsets`` partition's load waits ``delay_ms`` first, and the
    first ``failures[p]`` loads of partition ``p`` fail."""

    def __init__(self, delay_ms: int, failures: Mapping[int, int]) -> None:
        self._delay_ms = delay_ms
        self._failures = failures
        self._attempts: dict[int, int] = {}

    async def __call__(self, *, topic: str, partition: int) -> None:
        if topic != CONSUMER_OFFSETS_TOPIC:
            return
        if self._delay_ms > 0:
            await asyncio.sleep(self._delay_ms / 1000)
        attempt = self._attempts[partition] = self._attempts.get(partition, 0) + 1
        if attempt <= self._failures.get(partition, 0):
            raise OSError(f"oncelog.debug.group.load.fail: {topic}-{partition}")
