"""Log levels read and set at run time (KIP-495, ``GET|PUT /admin/loggers``), as
Kafka Connect's ``Loggers`` does over log4j, here over Python's ``logging``.

- Levels are named as Kafka names them (``TRACE``, ``DEBUG``, ``INFO``, ``WARN``,
  ``ERROR``, ``FATAL``, ``OFF``); Python's ``WARNING`` and ``CRITICAL`` are accepted.
- Setting a level on a namespace sets it on that logger and on every existing logger
  below it, and returns the names touched, sorted (Kafka's ``setLevel``).
- ``last_modified`` is the time of the last change made here (None before one); a
  logger already at the level is left alone.
- The root logger is ``root``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

ROOT = "root"
TRACE = 5  # below DEBUG, as log4j's TRACE
OFF = logging.CRITICAL + 10
_BY_NAME = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": OFF,
    "ALL": logging.NOTSET + 1,
}
_NAMES = {TRACE: "TRACE", logging.DEBUG: "DEBUG", logging.INFO: "INFO"}
_NAMES |= {logging.WARNING: "WARN", logging.ERROR: "ERROR", logging.CRITICAL: "FATAL", OFF: "OFF"}


def parse_level(name: str) -> int | None:
    """The level named ``name`` (any case), or None if it names none."""
    return _BY_NAME.get(name.strip().upper())


def level_name(level: int) -> str:
    return _NAMES.get(level, logging.getLevelName(level))


class Loggers:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._last_modified: dict[str, int] = {}

    @staticmethod
    def _logger(name: str) -> logging.Logger:
        return logging.getLogger() if name.lower() == ROOT else logging.getLogger(name)

    @staticmethod
    def _existing() -> list[str]:
        manager = logging.Logger.manager
        return sorted(n for n, v in manager.loggerDict.items() if isinstance(v, logging.Logger))

    def _entry(self, name: str, level: int) -> dict[str, Any]:
        return {"level": level_name(level), "last_modified": self._last_modified.get(name)}

    def all_levels(self) -> dict[str, dict[str, Any]]:
        """The root logger and every logger whose level is set explicitly."""
        out = {ROOT: self._entry(ROOT, logging.getLogger().level)}
        for name in self._existing():
            level = logging.getLogger(name).level
            if level != logging.NOTSET:
                out[name] = self._entry(name, level)
        return out

    def level(self, name: str) -> dict[str, Any] | None:
        """A logger's effective level; None if no such logger exists."""
        if name.lower() != ROOT and name not in self._existing():
            return None
        return self._entry(name, self._logger(name).getEffectiveLevel())

    def set_level(self, namespace: str, level: int) -> list[str]:
        """Set ``level`` on ``namespace`` and the loggers below it; the names touched."""
        if namespace.lower() == ROOT:
            touched = [ROOT, *self._existing()]
        else:
            prefix = namespace + "."
            touched = [namespace] + [n for n in self._existing() if n.startswith(prefix)]
        now = int(self.clock() * 1000)
        for name in touched:
            logger = self._logger(name)
            if logger.getEffectiveLevel() == level and logger.level != logging.NOTSET:
                continue  # unchanged: last_modified stays, as in Kafka
            logger.setLevel(level)
            self._last_modified[name] = now
        return sorted(set(touched))
