"""One log setup for every long-running oncelog process (broker, Connect worker):
``--log-level`` and ``--log-format text|json``; both checked with a one-line error."""

from __future__ import annotations

import datetime
import json
import logging
from typing import Annotated, Any

import typer

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# LogRecord attributes that are not caller-supplied ``extra`` fields.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


def _one_of(flag: str, allowed: tuple[str, ...], value: str, *, upper: bool) -> str:
    norm = value.upper() if upper else value.lower()
    if norm not in allowed:
        typer.echo(f"error: {flag} {value}: expected one of {', '.join(allowed)}", err=True)
        raise typer.Exit(2)
    return norm


# log4j's names, as Kafka operators type them.
ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "TRACE": "DEBUG"}


def _level(value: str) -> str:
    return _one_of("--log-level", LEVELS, ALIASES.get(value.upper(), value), upper=True)


def _format(value: str) -> str:
    return _one_of("--log-format", FORMATS, value, upper=False)


LogLevel = Annotated[
    str, typer.Option("--log-level", callback=_level, help=f"One of {', '.join(LEVELS)}.")
]
LogFormat = Annotated[
    str,
    typer.Option("--log-format", callback=_format, help="text, or json: one object a line."),
]


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts (UTC, ISO 8601), level, logger, message, then any
    ``extra=`` fields of the call, and the traceback as ``exc`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | None) else str(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
