"""Writes COMMIT/ABORT control batches into partition logs (the marker writer).

On a single node every partition is local, so a marker is an append. Seed 003:
a marker goes only to partitions the transaction actually wrote; a partition
that was added but never written has no open transaction of this producer and
is left untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from oncelog.records.batch import parse_header
from oncelog.records.control import build_end_txn_marker
from oncelog.storage.log import PartitionLog
from oncelog.storage.producer_state import ProducerStateError

log = logging.getLogger(__name__)


def write_marker(
    part: PartitionLog,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    *,
    now_ms: int,
    only_if_written: bool = True,
) -> ErrorCode:
    """Append one end-txn marker; returns the error a WriteTxnMarkers caller would see."""
    entry = part.producer_state.producer(producer_id)
    if only_if_written and (entry is None or entry.current_txn_first_offset is None):
        return ErrorCode.none
    batch = bytearray(
        build_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms=now_ms)
    )
    try:
        part.append_control(batch, parse_header(batch), now_ms=now_ms)
    except ProducerStateError as exc:
        log.warning("marker for producer %d rejected: %s", producer_id, exc)
        return exc.error_code
    return ErrorCode.none


MarkerListener = Callable[[str, int, int, bool], None]
