"""Shared by the A/B benches: a broker started with a patient timeout (a loaded shared
machine can take longer than the embedded default to import and start)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from oncelog.embedded import EmbeddedBroker

START_TIMEOUT_S = 180.0


@contextlib.contextmanager
def started(broker: EmbeddedBroker) -> Iterator[EmbeddedBroker]:
    broker.start(timeout=START_TIMEOUT_S)
    try:
        yield broker
    finally:
        broker.stop()
