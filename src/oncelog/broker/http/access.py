"""Who is asking the HTTP listener, and what of the broker's state they may see or do.

``basic_credentials`` reads an HTTP basic ``Authorization`` header (RFC 7617). A
``Scope`` holds one request's principal and answers, through the broker's authorizer,
which topics, transactional ids and groups it may DESCRIBE; the ``scoped_*`` functions
and ``ScopedView`` cut the metrics snapshot and the console's state down to that, by
the rules Kafka's APIs filter listings with. Without an authorizer, or for a super user,
``Scope.everything`` is true and nothing is filtered (the scrape does no extra work).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from oncelog.broker.authorizer import Authorizer
from oncelog.broker.metrics import Snapshot
from oncelog.broker.session import Session
from oncelog.broker.state_view import (
    BrokerStateView,
    GroupLag,
    Hanging,
    PartitionState,
    TxnView,
)
from oncelog.security.acl import CLUSTER_NAME, AclOperation, ResourceType

Op = AclOperation
Res = ResourceType

# The listener name the authorizer's denial log shows for HTTP callers.
HTTP_LISTENER = "metrics.listener"
# Shown instead of the transactional id of a hanging transaction whose partition the
# caller may read, but whose transactional id it may not describe.
HIDDEN_ID = "(not authorized)"


class Permits(Protocol):
    """What the filters ask: may the caller do ``operation`` on the resource?"""

    def __call__(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool: ...


class Scope:
    """One request's principal and its ACL decisions (cached for the request)."""

    def __init__(self, authorizer: Authorizer, principal: str, client_host: str) -> None:
        self.principal = principal
        self.everything = not authorizer.enabled or principal in authorizer.super_users
        self._authorizer = authorizer
        self._session = Session(
            listener=HTTP_LISTENER, principal=principal, client_host=client_host
        )
        self._decided: dict[tuple[AclOperation, ResourceType, str], bool] = {}

    def __call__(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Listings filter silently (no denial log line), as Kafka's do."""
        if self.everything:
            return True
        key = (operation, resource_type, name)
        allowed = self._decided.get(key)
        if allowed is None:
            allowed = self._authorizer.authorize(
                self._session, operation, resource_type, name, log_denied=False
            )
            self._decided[key] = allowed
        return allowed

    def check(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """An action's check: a denial is logged, as a refused request is on the Kafka port."""
        return self.everything or self._authorizer.authorize(
            self._session, operation, resource_type, name
        )


# -- the filters (Kafka's KafkaApis rules) ---------------------------------------------


def scoped_partitions(parts: list[PartitionState], may: Permits) -> list[PartitionState]:
    """Topic DESCRIBE, as Metadata leaves undescribable topics out of all-topic listings
    (KafkaApis.handleTopicMetadataRequest)."""
    return [p for p in parts if may(Op.DESCRIBE, Res.TOPIC, p.topic)]


def scoped_transactions(txns: list[TxnView], may: Permits) -> list[TxnView]:
    """TransactionalId DESCRIBE (KafkaApis.handleListTransactionsRequest), and only the
    partitions of topics the caller may describe (handleDescribeTransactionsRequest)."""
    out = []
    for t in txns:
        if not may(Op.DESCRIBE, Res.TRANSACTIONAL_ID, t.transactional_id):
            continue
        parts = tuple(tp for tp in t.partitions if may(Op.DESCRIBE, Res.TOPIC, tp[0]))
        out.append(t if parts == t.partitions else dataclasses.replace(t, partitions=parts))
    return out


def scoped_hanging(hanging: list[Hanging], may: Permits) -> list[Hanging]:
    """A hanging transaction is a producer's state in a partition, which Kafka shows only
    with Topic READ (KafkaApis.handleDescribeProducersRequest, what find-hanging uses);
    its transactional id only with TransactionalId DESCRIBE."""
    out = []
    for h in hanging:
        if not may(Op.READ, Res.TOPIC, h.topic):
            continue
        tid = h.transactional_id
        if tid is not None and not may(Op.DESCRIBE, Res.TRANSACTIONAL_ID, tid):
            h = dataclasses.replace(h, transactional_id=HIDDEN_ID)  # still overdue
        out.append(h)
    return out


def scoped_groups(lags: list[GroupLag], may: Permits) -> list[GroupLag]:
    """Group DESCRIBE, then Topic DESCRIBE per committed partition
    (KafkaApis.handleOffsetFetchRequest filters an all-topics fetch so)."""
    return [
        g
        for g in lags
        if may(Op.DESCRIBE, Res.GROUP, g.group_id) and may(Op.DESCRIBE, Res.TOPIC, g.topic)
    ]


def scoped_snapshot(snap: Snapshot, may: Permits) -> Snapshot:
    """The scrape with every per-resource series the caller may not see left out; counts
    derived from those lists (transactional ids, states, hanging kinds) count only what is
    left. Broker-wide figures without a resource name stay."""
    return dataclasses.replace(
        snap,
        partitions=scoped_partitions(snap.partitions, may),
        transactions=scoped_transactions(snap.transactions, may),
        hanging=scoped_hanging(snap.hanging, may),
        groups=scoped_groups(snap.groups, may),
        bytes_in={t: n for t, n in snap.bytes_in.items() if may(Op.DESCRIBE, Res.TOPIC, t)},
        bytes_out={t: n for t, n in snap.bytes_out.items() if may(Op.DESCRIBE, Res.TOPIC, t)},
    )


class ScopedView:
    """The console's reads of ``BrokerStateView``, filtered for one caller."""

    def __init__(self, view: BrokerStateView, may: Permits) -> None:
        self._view = view
        self._may = may

    def now_ms(self) -> int:
        return self._view.now_ms()

    def topic_visible(self, topic: str) -> bool:
        return self._may(Op.DESCRIBE, Res.TOPIC, topic)

    def partitions(self, *, internal: bool = False) -> list[PartitionState]:
        return scoped_partitions(self._view.partitions(internal=internal), self._may)

    def transactions(self) -> list[TxnView]:
        return scoped_transactions(self._view.transactions(), self._may)

    def hanging(
        self,
        partitions: list[PartitionState] | None = None,
        transactions: list[TxnView] | None = None,
    ) -> list[Hanging]:
        # From the whole state, then filtered: a transaction the caller may not see still
        # decides whether a producer's open transaction is tracked (overdue) or not.
        return scoped_hanging(self._view.hanging(), self._may)

    def group_lag(self) -> list[GroupLag]:
        return scoped_groups(self._view.group_lag(), self._may)


# -- the abort action -------------------------------------------------------------------


def abort_refusal(
    may: Callable[[AclOperation, ResourceType, str], bool],
    principal: str,
    topic: str,
    target: Hanging | None,
) -> str | None:
    """Why ``principal`` may not abort ``target`` (the hanging transaction the form
    names, None if there is none), or None if it may: what ``oncelog transactions
    abort`` needs on the Kafka port. Finding the producer is DescribeProducers (Topic
    READ); aborting it is InitProducerId for a transactional id the coordinator tracks
    (TransactionalId WRITE, KafkaApis.handleInitProducerIdRequest), else WriteTxnMarkers
    (Cluster CLUSTER_ACTION, KafkaApis.handleWriteTxnMarkersRequest)."""
    if not may(Op.READ, Res.TOPIC, topic):
        return f"abort refused: {principal} may not READ topic {topic} (DescribeProducers)"
    if target is None:
        return None  # nothing to abort: the abort itself says so
    if target.transactional_id is not None:
        if not may(Op.WRITE, Res.TRANSACTIONAL_ID, target.transactional_id):
            # The id is not named: the caller may not be allowed to describe it.
            return (
                f"abort refused: {principal} may not WRITE the transactional id of "
                f"producer {target.producer_id} (InitProducerId)"
            )
        return None
    if not may(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):
        return f"abort refused: {principal} may not CLUSTER_ACTION on the cluster (WriteTxnMarkers)"
    return None
