"""What the connection loop hands a handler, and what a handler may answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from oncelog.broker.session import Session
from oncelog.protocol.messages import RequestHeader, response_module
from oncelog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


class NoResponse:
    """Returned by a handler when Kafka sends nothing back (acks=0 produce)."""


NO_RESPONSE = NoResponse()


@dataclass(slots=True)
class Deferred:
    """A handler's answer that completes later, after work that needs no event loop turn
    of its own (an acks=all produce waiting for its fdatasync). The connection reads and
    dispatches the next requests meanwhile, so their appends share one group fdatasync,
    and still writes every response in request order."""

    response: Awaitable[Any]


class CloseConnection(Exception):
    """Kafka's answer to a request it cannot serve: close the connection."""


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    connection_id: int
    peer: str
    session: Session = field(default_factory=Session)

    def authorized(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Is this connection's principal allowed ``operation`` on the resource?
        (Always true without an authorizer.) Listings that silently filter pass
        ``log_denied=False``, as Kafka does."""
        return self.broker.authorizer.authorize(
            self.session, operation, resource_type, name, log_denied=log_denied
        )

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where clients of this connection's listener are told to connect."""
        return self.broker.advertised_address(self.session.listener)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response(self) -> ModuleType:
        """The kio module holding this request's response classes."""
        return response_module(self.header.api_key, self.header.api_version)


# A handler gets the decoded kio request and returns a kio response (or NO_RESPONSE, or
# a Deferred one).
Handler = Callable[[RequestContext, Any], Any | Awaitable[Any]]
