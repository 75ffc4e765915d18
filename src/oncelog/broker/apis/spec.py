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

# Per-API authorization (ACLs) arrives with the security issue: a rule sees the
# decoded request and answers whether the principal may run it. Dispatch does not
# consult it yet.
AuthorizationRule = Callable[[RequestContext, Any], bool]


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
