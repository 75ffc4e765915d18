"""Connect's group sub-protocol bytes (JoinGroup metadata, SyncGroup assignments)."""

from __future__ import annotations

import struct

import pytest

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.distributed.connect_protocol import (
    ConnectAssignment,
    ConnectProtocolVersion,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    join_protocols,
)
from oncelog.connect.runtime.work import Work


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_eager_metadata_and_assignment_layout() -> None:
    state = WorkerState("http://w1:8083/", 42)
    assert encode_metadata(state, ConnectProtocolVersion.EAGER) == struct.pack(">h", 0) + _s(
        "http://w1:8083/"
    ) + struct.pack(">q", 42)
    assignment = ConnectAssignment(
        0, 0, "leader-1", "http://l:8083/", 7, Work.of(["c"], [ConnectorTaskId("c", 1)])
    )
    expected = (
        struct.pack(">hh", 0, 0) + _s("leader-1") + _s("http://l:8083/") + struct.pack(">q", 7)
        + struct.pack(">i", 1) + _s("c") + struct.pack(">iii", 2, -1, 1)
    )  # fmt: skip
    assert encode_assignment(assignment) == expected
    assert decode_assignment(expected) == assignment


def test_incremental_assignment_layout_and_round_trip() -> None:
    assignment = ConnectAssignment(
        2, 0, "m-1", "http://l:8083/", 99,
        assigned=Work.of(["b"], [ConnectorTaskId("a", 0), ConnectorTaskId("b", 2)]),
        revoked=Work.of([], [ConnectorTaskId("a", 3)]),
        delay_ms=1500,
    )  # fmt: skip
    data = encode_assignment(assignment)
    expected = (
        struct.pack(">hh", 2, 0) + _s("m-1") + _s("http://l:8083/") + struct.pack(">q", 99)
        + struct.pack(">i", 2) + _s("a") + struct.pack(">ii", 1, 0) + _s("b") + struct.pack(">iii", 2, -1, 2)
        + struct.pack(">i", 1) + _s("a") + struct.pack(">ii", 1, 3)
        + struct.pack(">i", 1500)
    )  # fmt: skip
    assert data == expected
    assert decode_assignment(data) == assignment


def test_metadata_carries_the_current_assignment() -> None:
    current = ConnectAssignment(1, 0, "m", "u", 5, Work.of(["x"], []))
    state = WorkerState("http://w:1/", 5, current)
    data = encode_metadata(state, ConnectProtocolVersion.COMPATIBLE)
    assert decode_metadata(data) == (1, state)
    empty = encode_metadata(WorkerState("http://w:1/", 5), ConnectProtocolVersion.SESSIONED)
    assert empty.endswith(struct.pack(">i", -1))  # no assignment: null bytes
    assert decode_metadata(empty) == (2, WorkerState("http://w:1/", 5, None))
    # A v1 reader of a v0 member's metadata: no allocation field at all.
    assert decode_metadata(encode_metadata(state, ConnectProtocolVersion.EAGER)) == (
        0,
        WorkerState("http://w:1/", 5),
    )


def test_join_protocols_offer_older_versions_too() -> None:
    state = WorkerState("http://w:1/", 0)
    assert [n for n, _ in join_protocols(state, ConnectProtocolVersion.SESSIONED)] == [
        "sessioned",
        "compatible",
        "default",
    ]
    assert [n for n, _ in join_protocols(state, ConnectProtocolVersion.COMPATIBLE)] == [
        "compatible",
        "default",
    ]
    assert [n for n, _ in join_protocols(state, ConnectProtocolVersion.EAGER)] == ["default"]
    assert ConnectProtocolVersion.from_config("sessioned") is ConnectProtocolVersion.SESSIONED


def test_truncated_data_is_rejected() -> None:
    with pytest.raises(ValueError, match="truncated"):
        decode_assignment(b"\x00\x01\x00")
    with pytest.raises(ValueError, match="Unsupported subscription version: -1"):
        decode_metadata(struct.pack(">h", -1))
