"""--log-format json and the checked --log-level of the broker and Connect worker CLIs."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from oncelog.cli.logging_setup import JsonFormatter
from oncelog.cli.main import app


def record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("oncelog.test", logging.WARNING, __file__, 1, msg, args, None)
    r.created = 0.5
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def test_json_lines_carry_time_level_logger_message_and_extra_fields() -> None:
    line = JsonFormatter().format(record("lag %d on %s", 3, "t-0", api="METADATA", n=2))
    assert json.loads(line) == {
        "ts": "1970-01-01T00:00:00.500+00:00",
        "level": "WARNING",
        "logger": "oncelog.test",
        "message": "lag 3 on t-0",
        "api": "METADATA",
        "n": 2,
    }


def test_json_lines_carry_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        r = record("failed")
        r.exc_info = sys.exc_info()
    out = json.loads(JsonFormatter().format(r))
    assert out["message"] == "failed"
    assert out["exc"].splitlines()[-1] == "ValueError: boom"


@pytest.mark.parametrize("command", [["broker"], ["connect", "worker"]])
def test_bad_log_options_are_one_line_errors(command: list[str]) -> None:
    r = CliRunner().invoke(app, [*command, "--log-level", "LOUD"])
    assert (r.exit_code, r.stderr) == (
        2,
        "error: --log-level LOUD: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL\n",
    )
    r = CliRunner().invoke(app, [*command, "--log-format", "xml"])
    assert (r.exit_code, r.stderr) == (2, "error: --log-format xml: expected one of text, json\n")


@pytest.mark.parametrize(
    ("given", "level"), [("warn", "WARNING"), ("TRACE", "DEBUG"), ("info", "INFO")]
)
def test_log4j_level_names_are_accepted(given: str, level: str) -> None:
    from oncelog.cli.logging_setup import _level

    assert _level(given) == level
