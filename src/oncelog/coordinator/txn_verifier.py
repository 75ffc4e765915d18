"""The transaction coordinator's check, as the produce path and the group coordinator see it."""

from __future__ import annotations

from typing import Protocol

from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import TopicPartition


class TxnVerifier(Protocol):
    """The transaction coordinator's answer to "may this producer write ``partition`` in
    its transaction now" (``TransactionService.verify_in_transaction``). Both the produce
    path and TxnOffsetCommit ask it; the transaction coordinator itself sits in a sibling
    layer, so they depend on this shape rather than on it."""

    def __call__(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partition: TopicPartition,
        *,
        fenced: ErrorCode = ...,
    ) -> ErrorCode: ...
