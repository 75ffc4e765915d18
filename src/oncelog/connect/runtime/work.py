"""A set of connectors and tasks: what a worker owns, what the cluster configures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from oncelog.connect.api.task_id import ConnectorTaskId


@dataclass(frozen=True)
class Work:
    """A set of connectors and tasks."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[ConnectorTaskId] = frozenset()

    @classmethod
    def of(cls, connectors: Iterable[str] = (), tasks: Iterable[ConnectorTaskId] = ()) -> Work:
        return cls(frozenset(connectors), frozenset(tasks))

    def __or__(self, other: Work) -> Work:
        return Work(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: Work) -> Work:
        return Work(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: Work) -> Work:
        return Work(self.connectors & other.connectors, self.tasks & other.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def __len__(self) -> int:
        return len(self.connectors) + len(self.tasks)


EMPTY = Work()


def configured_work(task_counts: Mapping[str, int]) -> Work:
    """All connectors and their tasks, from connector name -> committed task count."""
    return Work.of(
        task_counts, (ConnectorTaskId(c, i) for c, n in task_counts.items() for i in range(n))
    )
