"""Why a herder request cannot be served here and now, as Kafka Connect's
``NotLeaderException`` and ``RebalanceNeededException``. The REST layer forwards the
first to the leader and answers 409 for the second."""

from __future__ import annotations

from oncelog.connect.api.errors import ConnectException, ConnectRestException

CONFLICT = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"


class NotLeaderError(ConnectException):
    """The request must be served by the leader, at ``leader_url`` (None: unknown)."""

    def __init__(
        self, leader_url: str | None, message: str = "This worker is not the leader"
    ) -> None:
        super().__init__(f"{message}; the leader is {leader_url}")
        self.leader_url = leader_url


class NotAssignedError(ConnectException):
    """The task runs on another worker, at ``owner_url`` (None: unknown)."""

    def __init__(self, owner_url: str | None, what: str) -> None:
        super().__init__(f"{what} is not running on this worker")
        self.owner_url = owner_url


class RebalanceNeeded(ConnectRestException):
    """A rebalance is expected: the request would act on a stale assignment
    (``DistributedHerder.checkRebalanceNeeded``)."""

    def __init__(self) -> None:
        super().__init__(409, CONFLICT)
