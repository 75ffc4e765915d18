"""Worker group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with
protocol type ``connect``, which librdkafka cannot do (it only joins consumer groups).

This is the one module of ``connect`` that talks the Kafka protocol itself. It is
built on kio's request classes over a minimal blocking socket transport
(:class:`SocketTransport`), to be swapped for the client layer's protocol client
(TLS, SASL, retry policy, errors classified by code) once that exists. Everything
above it (the herder) only sees :class:`ConnectGroupMember`.

The member offers Connect's sub-protocols (``sessioned``, ``compatible``,
``default``), handles the join handshake (KIP-394 ``MEMBER_ID_REQUIRED``), and
hands the leader every member's metadata; the leader's assignment is computed
outside (``assignor``) and passed to :meth:`ConnectGroupMember.sync`.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i32Timedelta

from oncelog.connect.connect_protocol import PROTOCOL_TYPE
from oncelog.connect.errors import ConnectException

_SIZE = struct.Struct(">i")

# Errors after which the member rejoins, and after which it looks up the coordinator again.
REJOIN_ERRORS = frozenset(
    {ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation, ErrorCode.unknown_member_id}
)
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)


class MembershipError(ConnectException):
    def __init__(self, api: str, code: ErrorCode) -> None:
        super().__init__(f"{api} failed: {code.name.upper()} ({code.value})")
        self.api = api
        self.code = code


class SocketTransport:
    """One blocking connection: size-prefixed frames with kio-encoded bodies."""

    def __init__(self, address: str, *, client_id: str, timeout_s: float) -> None:
        host, _, port = address.rpartition(":")
        self._sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._client_id = client_id
        self._correlation = itertools.count(1)

    def request(self, request: Any) -> Any:
        correlation_id = next(self._correlation)
        header_schema = request.__header_schema__
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        header = header_schema(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id=self._client_id,
        )
        entity_writer(header_schema)(buf, header)
        entity_writer(type(request))(buf, request)
        data = buf.getbuffer()
        _SIZE.pack_into(data, 0, len(data) - 4)
        del data
        self._sock.sendall(buf.getvalue())
        frame = self._recv_exact(_SIZE.unpack(self._recv_exact(4))[0])
        schema = load_response_schema(request.__api_key__, request.__version__)
        response_header, pos = entity_reader(schema.__header_schema__)(frame, 0)
        if response_header.correlation_id != correlation_id:
            raise ConnectException(
                f"correlation id {response_header.correlation_id} != {correlation_id}"
            )
        body, _ = entity_reader(schema)(frame, pos)
        return body

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._sock.close()


@dataclass(frozen=True)
class JoinResult:
    generation: int
    protocol: str
    leader_id: str
    member_id: str
    members: tuple[tuple[str, bytes], ...]  # (member id, metadata); only the leader gets them

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.member_id


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(dt.timedelta(milliseconds=value))


class ConnectGroupMember:
    """A worker's membership in its Connect cluster group (``group.id``)."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        *,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        client_id: str = "connect-worker",
    ) -> None:
        self.bootstrap = bootstrap.split(",")[0].strip()
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self._transport: SocketTransport | None = None
        self._lock = threading.Lock()  # one request in flight on the connection

    # -- connection --------------------------------------------------------------------

    def _timeout_s(self) -> float:
        # A JoinGroup may block for a whole rebalance.
        return self.rebalance_timeout_ms / 1000 + 30

    def _coordinator(self) -> SocketTransport:
        if self._transport is None:
            bootstrap = SocketTransport(
                self.bootstrap, client_id=self.client_id, timeout_s=self._timeout_s()
            )
            try:
                response = bootstrap.request(
                    FindCoordinatorRequest(key=self.group_id, key_type=i8(0))
                )
            finally:
                bootstrap.close()
            if response.error_code != ErrorCode.none:
                raise MembershipError("FindCoordinator", response.error_code)
            self._transport = SocketTransport(
                f"{response.host}:{response.port}",
                client_id=self.client_id,
                timeout_s=self._timeout_s(),
            )
        return self._transport

    def _request(self, request: Any) -> Any:
        with self._lock:
            try:
                response = self._coordinator().request(request)
            except OSError:
                self._drop_connection()
                raise
            if response.error_code in COORDINATOR_ERRORS:
                self._drop_connection()
            return response

    def _drop_connection(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    # -- group protocol ----------------------------------------------------------------

    def join(self, protocols: Sequence[tuple[str, bytes]], *, attempts: int = 5) -> JoinResult:
        """Join (or rejoin) the group, offering ``protocols`` (name, metadata) in order
        of preference; returns when the coordinator completes the join phase."""
        request_protocols = tuple(
            JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols
        )
        last: ErrorCode | None = None
        for _ in range(attempts):
            response = self._request(
                JoinGroupRequest(
                    group_id=GroupId(self.group_id),
                    session_timeout=_ms(self.session_timeout_ms),
                    rebalance_timeout=_ms(self.rebalance_timeout_ms),
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=request_protocols,
                )
            )
            last = response.error_code
            if last == ErrorCode.none:
                self.member_id = response.member_id
                self.generation = int(response.generation_id)
                return JoinResult(
                    int(response.generation_id),
                    response.protocol_name,
                    response.leader,
                    response.member_id,
                    tuple((m.member_id, bytes(m.metadata)) for m in response.members),
                )
            if last == ErrorCode.member_id_required:
                self.member_id = response.member_id  # KIP-394: join again with the given id
            elif last == ErrorCode.unknown_member_id:
                self.member_id = ""
            elif last not in COORDINATOR_ERRORS and last != ErrorCode.rebalance_in_progress:
                raise MembershipError("JoinGroup", last)
        assert last is not None
        raise MembershipError("JoinGroup", last)

    def sync(self, assignments: dict[str, bytes] | None = None) -> bytes:
        """Send the leader's assignments (None for followers); returns this member's."""
        response = self._request(
            SyncGroupRequest(
                group_id=GroupId(self.group_id),
                generation_id=i32(self.generation),
                member_id=self.member_id,
                group_instance_id=None,
                assignments=tuple(
                    SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in (assignments or {}).items()
                ),
            )
        )
        if response.error_code != ErrorCode.none:
            raise MembershipError("SyncGroup", response.error_code)
        return bytes(response.assignment)

    def heartbeat(self) -> ErrorCode:
        """``ErrorCode.none`` while the generation stands; a code from
        :data:`REJOIN_ERRORS` means rejoin. Other errors raise."""
        response = self._request(
            HeartbeatRequest(
                group_id=GroupId(self.group_id),
                generation_id=i32(self.generation),
                member_id=self.member_id,
                group_instance_id=None,
            )
        )
        code: ErrorCode = response.error_code
        if code == ErrorCode.unknown_member_id:
            self.member_id = ""
        if code == ErrorCode.none or code in REJOIN_ERRORS or code in COORDINATOR_ERRORS:
            return code
        raise MembershipError("Heartbeat", code)

    def leave(self) -> None:
        """Leave the group so the others rebalance at once (a clean shutdown)."""
        if not self.member_id:
            return
        try:
            self._request(
                LeaveGroupRequest(
                    group_id=GroupId(self.group_id),
                    members=(MemberIdentity(member_id=self.member_id, group_instance_id=None),),
                )
            )
        finally:
            self.member_id = ""
            self.generation = -1

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
