"""The leader's assignment under the eager protocol (``connect.protocol=eager``, Kafka's
``EagerAssignor``), pure: every member stopped everything before joining, and gets its
whole share anew. Connectors are dealt round-robin over the members sorted by id, then
the tasks, continuing around the same circle (dealing connectors and tasks separately
keeps one-task connectors from piling a connector and its task on every other worker).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.work import Work


def eager_assign(members: Iterable[str], configured: Work) -> dict[str, Work]:
    """Member id → what it runs until the next round."""
    ids = sorted(members)
    connectors: dict[str, list[str]] = {m: [] for m in ids}
    tasks: dict[str, list[ConnectorTaskId]] = {m: [] for m in ids}
    circle = itertools.cycle(ids)
    for name in sorted(configured.connectors):
        connectors[next(circle)].append(name)
    for task in sorted(configured.tasks, key=lambda t: (t.connector, t.task)):
        tasks[next(circle)].append(task)
    return {m: Work.of(connectors[m], tasks[m]) for m in ids}
