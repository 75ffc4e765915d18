"""A connector's target state, as written to the config topic (Kafka Connect's
``TargetState``): what the user asked for, not what runs (that is the status)."""

from __future__ import annotations

import enum


class TargetState(enum.Enum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
