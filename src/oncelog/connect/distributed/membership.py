"""Worker group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup with
protocol type ``connect``, which librdkafka cannot do (it only joins consumer groups).

This is the one module of ``connect`` that talks the Kafka protocol itself: kio's
request classes over the client layer's connections (``oncelog.client.wire``, with
the worker's TLS and SASL settings). Everything above it (the herder) only sees
:class:`ConnectGroupMember`.

The member offers Connect's sub-protocols (``sessioned``, ``compatible``,
``default``), handles the join handshake (KIP-394 ``MEMBER_ID_REQUIRED``), and
hands the leader every member's metadata; the leader's assignment is computed
outside (``assignor``) and passed to :meth:`ConnectGroupMember.sync`.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId
from kio.static.primitive import i8, i32, i32Timedelta

from oncelog.client.config import ClientConfig
from oncelog.client.wire import WireClient
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.distributed.connect_protocol import PROTOCOL_TYPE

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
        bootstrap: str | ClientConfig,
        group_id: str,
        *,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        client_id: str = "connect-worker",
    ) -> None:
        # A bare address string means PLAINTEXT; a ClientConfig carries TLS/SASL settings.
        self.client_config = (
            bootstrap if isinstance(bootstrap, ClientConfig) else ClientConfig.of(bootstrap)
        )
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self._transport: WireClient | None = None
        self._lock = threading.Lock()  # one request in flight on the connection

    # -- connection --------------------------------------------------------------------

    def _timeout_s(self) -> float:
        # A JoinGroup may block for a whole rebalance.
        return self.rebalance_timeout_ms / 1000 + 30

    def _connect(self, address: str) -> WireClient:
        return WireClient(
            address,
            client_id=self.client_id,
            timeout=self._timeout_s(),
            security=self.client_config.security,
        )

    def _coordinator(self) -> WireClient:
        if self._transport is None:
            response = None
            failures: list[str] = []
            for server in self.client_config.servers():
                try:
                    with self._connect(server) as bootstrap:
                        response = bootstrap.request(
                            FindCoordinatorRequest(key=self.group_id, key_type=i8(0))
                        )
                    break
                except OSError as exc:
                    failures.append(f"{server}: {exc}")
            if response is None:
                # An OSError, as each failure was: the herder retries it after
                # retry.backoff.ms (a broker restarting), not worker.unsync.backoff.ms.
                raise ConnectionError(f"No bootstrap server answered: {'; '.join(failures)}")
            if response.error_code != ErrorCode.none:
                raise MembershipError("FindCoordinator", response.error_code)
            self._transport = self._connect(f"{response.host}:{response.port}")
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
        if response.error_code == ErrorCode.unknown_member_id:
            self.member_id = ""  # the next join starts afresh
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
