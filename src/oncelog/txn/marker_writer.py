"""The one marker writer: COMMIT/ABORT control batches into partition logs.

Used by the transaction coordinator when it completes a transaction and by the
WriteTxnMarkers API (admin tools aborting a hanging transaction, KIP-664). Either way a
written marker wakes fetches waiting on the partition, and a marker on a
``__consumer_offsets`` partition settles the producer's pending transactional offsets in
the group coordinator (commit makes them visible, abort drops them).

On a single node every partition is local, so a marker is an append. The
coordinator sends a marker only to partitions the transaction actually wrote; a partition
that was added but never written has no open transaction of this producer and is left
untouched (``only_if_written``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import (
    CONSUMER_OFFSETS_TOPIC,
    AppendListener,
    PartitionLookup,
)
from oncelog.records.batch import parse_header
from oncelog.records.control import build_end_txn_marker
from oncelog.storage.producer_state import ProducerStateError
from oncelog.txn.messages import TxnMarker

log = logging.getLogger(__name__)

OffsetsMarkerListener = Callable[[int, int, bool], None]
"""Told ``(partition, producer_id, commit)`` once a marker is in ``__consumer_offsets``."""


class MarkerWriter:
    def __init__(
        self,
        partitions: PartitionLookup,
        appends: AppendListener,
        offsets_listener: OffsetsMarkerListener | None = None,
    ) -> None:
        self._partitions = partitions
        self._appends = appends
        # Set by the wiring once the group coordinator exists (it is created after us).
        self.offsets_listener = offsets_listener

    def write(
        self,
        topic: str,
        partition: int,
        marker: TxnMarker,
        *,
        now_ms: int,
        only_if_written: bool = False,
    ) -> ErrorCode:
        """Write one marker; returns the error a WriteTxnMarkers caller would see. Raises
        ``OSError`` on a storage failure (the coordinator retries; the API answers)."""
        part = self._partitions.partition(topic, partition)
        if part is None:
            return ErrorCode.unknown_topic_or_partition
        if only_if_written:
            entry = part.producer_entry(marker.producer_id)
            if entry is None or entry.current_txn_first_offset is None:
                return ErrorCode.none
        batch = bytearray(
            build_end_txn_marker(
                marker.producer_id,
                marker.producer_epoch,
                marker.commit,
                marker.coordinator_epoch,
                timestamp_ms=now_ms,
            )
        )
        try:
            part.append_control(batch, parse_header(batch), now_ms=now_ms)
        except ProducerStateError as exc:
            # the caller reports it: a warning for the coordinator's own markers, a client
            # fault for WriteTxnMarkers (a fuzzer sent thousands a minute)
            log.debug("marker for producer %d rejected: %s", marker.producer_id, exc)
            return exc.error_code
        self._appends.notify((topic, partition))
        if topic == CONSUMER_OFFSETS_TOPIC and self.offsets_listener is not None:
            self.offsets_listener(partition, marker.producer_id, marker.commit)
        return ErrorCode.none
