"""Kafka Connect's group sub-protocol: the bytes workers put in JoinGroup metadata and
the leader puts in SyncGroup assignments (protocol type ``connect``).

Three protocols exist, offered in preference order by a worker:

- ``sessioned`` (version 2) and ``compatible`` (version 1), incremental cooperative:
  metadata = version, url, config offset, and the worker's current assignment
  (nullable bytes); assignment = version, error, leader, leader url, config offset,
  assigned and revoked connectors/tasks, scheduled delay.
- ``default`` (version 0), eager: metadata = version, url, config offset;
  assignment = version, error, leader, leader url, config offset, assigned.

Assignments are grouped by connector: ``[connector, [task ids]]``, where task id
``-1`` stands for the connector instance itself. Encodings use Kafka's classic
protocol types (big-endian; STRING = int16 length + UTF-8; BYTES = int32 length;
ARRAY = int32 count, -1 for null).
"""

from __future__ import annotations

import enum
import struct
from collections import defaultdict
from dataclasses import dataclass

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.work import EMPTY, Work

PROTOCOL_TYPE = "connect"
CONNECTOR_TASK = -1

NO_ERROR = 0
CONFIG_MISMATCH = 1


class ConnectProtocolVersion(enum.IntEnum):
    EAGER = 0
    COMPATIBLE = 1
    SESSIONED = 2

    @property
    def protocol_name(self) -> str:
        return {0: "default", 1: "compatible", 2: "sessioned"}[int(self)]

    @classmethod
    def from_config(cls, value: str) -> ConnectProtocolVersion:
        """From ``connect.protocol`` (``eager`` | ``compatible`` | ``sessioned``)."""
        return {"eager": cls.EAGER, "compatible": cls.COMPATIBLE, "sessioned": cls.SESSIONED}[value]

    @classmethod
    def from_name(cls, name: str) -> ConnectProtocolVersion:
        return {"default": cls.EAGER, "compatible": cls.COMPATIBLE, "sessioned": cls.SESSIONED}[
            name
        ]


@dataclass(frozen=True)
class WorkerState:
    """A worker's JoinGroup metadata."""

    url: str
    config_offset: int
    assignment: ConnectAssignment | None = None  # versions 1+: what it runs now


@dataclass(frozen=True)
class ConnectAssignment:
    """What the leader hands one worker in SyncGroup."""

    version: int
    error: int
    leader: str
    leader_url: str
    config_offset: int
    assigned: Work = EMPTY
    revoked: Work = EMPTY
    delay_ms: int = 0


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def int32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def int64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, v: str) -> None:
        data = v.encode("utf-8")
        self.int16(len(data))
        self.parts.append(data)

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.int32(-1)
        else:
            self.int32(len(v))
            self.parts.append(v)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise ValueError("truncated Connect protocol data")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("null string in Connect protocol data")
        return bytes(self._take(n)).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else bytes(self._take(n))

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _write_work(w: _Writer, work: Work | None) -> None:
    if work is None:
        w.int32(-1)
        return
    by_connector: dict[str, list[int]] = defaultdict(list)
    for connector in work.connectors:
        by_connector[connector].append(CONNECTOR_TASK)
    for task in work.tasks:
        by_connector[task.connector].append(task.task)
    w.int32(len(by_connector))
    for connector in sorted(by_connector):
        w.string(connector)
        ids = sorted(by_connector[connector])
        w.int32(len(ids))
        for task_id in ids:
            w.int32(task_id)


def _read_work(r: _Reader) -> Work:
    count = r.int32()
    connectors: list[str] = []
    tasks: list[ConnectorTaskId] = []
    for _ in range(max(count, 0)):
        connector = r.string()
        for _ in range(max(r.int32(), 0)):
            task_id = r.int32()
            if task_id == CONNECTOR_TASK:
                connectors.append(connector)
            else:
                tasks.append(ConnectorTaskId(connector, task_id))
    return Work.of(connectors, tasks)


def encode_assignment(assignment: ConnectAssignment) -> bytes:
    w = _Writer()
    w.int16(assignment.version)
    w.int16(assignment.error)
    w.string(assignment.leader)
    w.string(assignment.leader_url)
    w.int64(assignment.config_offset)
    _write_work(w, assignment.assigned)
    if assignment.version >= ConnectProtocolVersion.COMPATIBLE:
        _write_work(w, assignment.revoked)
        w.int32(assignment.delay_ms)
    return w.getvalue()


def decode_assignment(data: bytes) -> ConnectAssignment:
    r = _Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"Unsupported subscription version: {version}")
    error, leader, leader_url, offset = r.int16(), r.string(), r.string(), r.int64()
    assigned = _read_work(r)
    revoked, delay = EMPTY, 0
    if version >= ConnectProtocolVersion.COMPATIBLE and not r.at_end():
        revoked = _read_work(r)
        delay = r.int32() if not r.at_end() else 0
    return ConnectAssignment(version, error, leader, leader_url, offset, assigned, revoked, delay)


def encode_metadata(state: WorkerState, version: ConnectProtocolVersion) -> bytes:
    w = _Writer()
    w.int16(int(version))
    w.string(state.url)
    w.int64(state.config_offset)
    if version >= ConnectProtocolVersion.COMPATIBLE:
        a = state.assignment
        w.nullable_bytes(None if a is None else encode_assignment(a))
    return w.getvalue()


def decode_metadata(data: bytes) -> tuple[int, WorkerState]:
    r = _Reader(data)
    version = r.int16()
    if version < 0:
        raise ValueError(f"Unsupported subscription version: {version}")
    url, offset = r.string(), r.int64()
    assignment = None
    if version >= ConnectProtocolVersion.COMPATIBLE and not r.at_end():
        raw = r.nullable_bytes()
        assignment = None if raw is None else decode_assignment(raw)
    return version, WorkerState(url, offset, assignment)


def join_protocols(
    state: WorkerState, configured: ConnectProtocolVersion
) -> list[tuple[str, bytes]]:
    """(name, metadata) pairs a worker offers, most preferred first (``sessioned``
    also offers ``compatible`` and ``default`` so mixed clusters can agree)."""
    versions = [v for v in sorted(ConnectProtocolVersion, reverse=True) if v <= configured]
    return [(v.protocol_name, encode_metadata(state, v)) for v in versions]
