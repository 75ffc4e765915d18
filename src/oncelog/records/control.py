"""Control records, chiefly the end-transaction markers (COMMIT / ABORT).

key   = version i16 (0) | type i16
value = version i16 (0) | coordinatorEpoch i32   (end-txn markers only)
Like Kafka, newer versions are parsed as version 0 and negative ones rejected.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .batch import InvalidRecordError
from .builder import build_batch, decode_batch
from .record import Buf, Record

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


@dataclass(slots=True, frozen=True)
class ControlRecord:
    type: ControlRecordType
    type_id: int  # as on the wire; differs from ``type`` only for UNKNOWN
    coordinator_epoch: int | None = None  # set for COMMIT / ABORT

    @property
    def is_end_txn_marker(self) -> bool:
        return self.type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT


def control_key(record_type: ControlRecordType) -> bytes:
    return _KEY.pack(0, record_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER_VALUE.pack(0, coordinator_epoch)


def parse_control_record(key: bytes | None, value: bytes | None) -> ControlRecord:
    """Parse a control record's key and, for end-txn markers, its value."""
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    try:
        record_type = ControlRecordType(type_id)
    except ValueError:
        record_type = ControlRecordType.UNKNOWN
    if record_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return ControlRecord(record_type, type_id)
    if value is None or len(value) < _MARKER_VALUE.size:
        raise InvalidRecordError("end transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return ControlRecord(record_type, type_id, coordinator_epoch)


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One-record transactional control batch, as Kafka's broker writes it."""
    record_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(0, 0, control_key(record_type), end_txn_marker_value(coordinator_epoch))
    return build_batch(
        [record],
        base_offset=base_offset,
        base_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_marker(buf: Buf, pos: int = 0) -> tuple[bool, int]:
    """(commit, coordinator_epoch) of the end-txn marker batch at ``pos``."""
    header, records = decode_batch(buf, pos)
    if not header.is_control or not records:
        raise InvalidRecordError("not a control batch")
    marker = parse_control_record(records[0].key, records[0].value)
    if marker.coordinator_epoch is None:
        raise InvalidRecordError(f"control record {marker.type.name} is not an end-txn marker")
    return marker.is_commit, marker.coordinator_epoch
