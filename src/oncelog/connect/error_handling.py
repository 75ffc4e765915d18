"""``errors.tolerance`` / ``errors.log.enable`` for the task loops."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.connect.errors import ConnectException

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorPolicy:
    tolerate_all: bool = False  # errors.tolerance=all
    log_errors: bool = False  # errors.log.enable
    log_messages: bool = False  # errors.log.include.messages

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ErrorPolicy:
        return cls(
            config.get("errors.tolerance", "none") == "all",
            config.get("errors.log.enable", "false").lower() == "true",
            config.get("errors.log.include.messages", "false").lower() == "true",
        )

    def tolerate(self, task: object, error: Exception, record: object) -> None:
        """Raise unless errors are tolerated; log the skipped record if asked to."""
        if not self.tolerate_all:
            raise ConnectException(f"Tolerance exceeded in error handler: {error}") from error
        if self.log_errors:
            detail = f" {record}" if self.log_messages else ""
            log.error("%s: skipping a record after error: %s%s", task, error, detail)


NO_TOLERANCE = ErrorPolicy()
