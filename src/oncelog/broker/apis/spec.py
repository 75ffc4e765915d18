"""The record each API module declares: key, version range, handler.

As in franz-go's kfake, every API module states the versions it serves next to
the code that serves them; ``registry`` collects the records and ApiVersions is
derived from them, so what is advertised is exactly what is dispatched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oncelog.broker.request import Handler, RequestContext
from oncelog.protocol.api_keys import ApiKey

# Per-API authorization: with an authorizer on, dispatch calls the rule before the
# handler. It returns None to let the request through, or the response Kafka sends
# when the principal lacks a request-level permission (per-item checks, where Kafka
# answers per partition or per resource, sit in the handler via ``ctx.authorized``).
AuthorizationRule = Callable[[RequestContext, Any], Any | None]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    authorize: AuthorizationRule | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise ValueError(
                f"{self.key.name}: bad version range {self.min_version}..{self.max_version}"
            )

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version
