"""A task's identity: its connector and its number (Kafka Connect's ``ConnectorTaskId``).

Every layer names tasks this way (config and status records, the worker, the
assignor, REST), so it lives with the plugin API, the lowest layer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"
