"""Client faults: the first of each kind logged in full, the rest counted per window."""

from __future__ import annotations

import logging

import pytest

from oncelog.broker.client_faults import ClientFaultLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_of_a_kind_is_logged_then_counted_and_summarised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    faults = ClientFaultLog(logging.getLogger("test.faults"), window_s=60, clock=clock)
    caplog.set_level(logging.INFO, "test.faults")
    for i in range(5):
        faults.note("closed connections", logging.INFO, "closing connection %d", i)
    faults.note("invalid requests", logging.WARNING, "invalid request %s", "x")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "closing connection 0"),
        (logging.WARNING, "invalid request x"),
    ]
    caplog.clear()
    clock.now += 59
    faults.flush()  # the window has not ended
    assert caplog.records == []
    clock.now += 1
    faults.flush()
    assert [r.getMessage() for r in caplog.records] == [
        "client faults not logged one by one in the last 60 s: 4 more closed connections "
        "(totals: 5 closed connections, 1 invalid requests)"
    ]
    caplog.clear()
    # a new window: the first one is logged in full again
    faults.note("closed connections", logging.INFO, "closing connection %d", 9)
    faults.close()  # nothing more of it: no summary
    assert [r.getMessage() for r in caplog.records] == ["closing connection 9"]
    assert faults.total == {"closed connections": 6, "invalid requests": 1}


def test_every_fault_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    faults = ClientFaultLog(logging.getLogger("test.faults.debug"), clock=Clock())
    caplog.set_level(logging.DEBUG, "test.faults.debug")
    for i in range(3):
        faults.note("closed connections", logging.INFO, "closing connection %d", i)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "closing connection 0"),
        (logging.DEBUG, "closing connection 1"),
        (logging.DEBUG, "closing connection 2"),
    ]
