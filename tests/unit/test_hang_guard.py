"""The suite's hang guard (tests/hang_guard.py): a test stuck where pytest-timeout's alarm
cannot reach it is ended with its processes, reported as failed, and not run again, and
the tests after it still run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INNER = """
import ctypes
import os
import signal
import subprocess
from pathlib import Path

import pytest

LOG = Path(os.environ["HANG_LOG"])


@pytest.mark.xdist_group("g")
def test_stuck_where_no_alarm_reaches():
    child = subprocess.Popen(["sleep", "600"])
    with LOG.open("a") as log:
        log.write(f"ran {child.pid}\\n")
    # A C call that does not return to the interpreter, however often a signal interrupts
    # it (librdkafka's loops retry): the alarm is never handled. The stack-dump signal
    # then reaches another thread, which dumps this one.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGUSR2})
    ctypes.CDLL(None).sleep(600)


@pytest.mark.xdist_group("g")
def test_after_it():
    with LOG.open("a") as log:
        log.write("after\\n")
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_test_stuck_outside_python_is_killed_once_and_the_run_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = pytester.path / "ran.log"
    monkeypatch.setenv("HANG_LOG", str(log))
    monkeypatch.setenv("ONCELOG_HANG_GRACE_S", "2")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    pytester.makepyfile(test_inner=INNER)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "tests.hang_guard", "-p", "no:cacheprovider", "-n", "1", "--dist", "loadgroup",
        "-o", "timeout=1", timeout=120,
    )  # fmt: skip
    took = time.monotonic() - started
    output = result.stdout.str() + result.stderr.str()
    lines = log.read_text().splitlines()
    runs = [line for line in lines if line.startswith("ran ")]
    assert len(runs) == 1, output  # the stuck test is not run again on a fresh worker
    assert "after" in lines, output
    result.assert_outcomes(passed=1, failed=1)
    assert "crashed while running 'test_inner.py::test_stuck_where_no_alarm_reaches" in output
    assert "hang guard: test_inner.py::test_stuck_where_no_alarm_reaches" in output
    assert "in test_stuck_where_no_alarm_reaches" in output  # faulthandler's stack dump
    # The process the stuck test started went with it.
    orphan = int(runs[0].split()[1])
    assert not _alive(orphan)
    assert took < 60, output


def test_an_arm_and_a_disarm_read_together_leave_the_worker_alone() -> None:
    """Both lines in one read: the disarm must not be lost in a buffer (the worker would be
    killed after its test had finished)."""
    import subprocess
    import threading

    from tests.hang_guard import watch

    worker = subprocess.Popen(["sleep", "30"])
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"arm 0.3 t.py::quick\ndisarm\n")
        closer = threading.Timer(1.5, os.close, (write_end,))
        closer.start()
        watch(worker.pid, read_end)  # returns at EOF
        closer.join()
        assert worker.poll() is None
    finally:
        os.close(read_end)
        worker.kill()
        worker.wait()
