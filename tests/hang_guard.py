"""Keep one hung test from stalling or multiplying through the whole suite.

A pytest plugin of two pieces (``tests/conftest.py`` imports its hooks):

- ``LoadGroupNoRerun``: pytest-xdist's ``--dist loadgroup`` scheduler puts a crashed
  worker's unfinished work unit back in the queue *including the test that crashed it*, so a
  test that hangs the same way every time crashes one fresh worker after another (up to
  ``--max-worker-restart``, 4 per worker) and a 15-minute suite runs for hours. This one
  reports the crashed test as failed, as xdist does, and re-queues only the tests after it.
- ``Watchdog``: pytest-timeout's signal method fails a test stuck in Python and lets its
  fixtures clean up, but its alarm never runs while the main thread is stuck in C code
  (librdkafka's destroy of a client nobody closed, spinning inside a garbage collection). A
  separate process, told each test's deadline (the timeout plus a grace period), dumps the
  worker's stacks through ``faulthandler`` (no GIL needed), kills the processes the worker
  started (brokers, Connect workers, JVMs: orphans would eat the CPU the other workers need)
  and then the worker, which xdist reports as a crash of that test.

Run as a script, this file is the watchdog process: ``python hang_guard.py PID`` reading
``arm SECONDS NODEID`` / ``disarm`` lines on stdin until EOF.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

# The worker dumps every thread's stack to stderr on this signal.
STACK_DUMP_SIGNAL = signal.SIGUSR2
# Seconds past pytest-timeout's limit before the watchdog acts: the signal method gets the
# first chance, and a test it fails may still tear its fixtures down.
GRACE_S = float(os.environ.get("ONCELOG_HANG_GRACE_S", "120"))


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(pid: int, nodeid: str, seconds: float) -> None:
    sys.stderr.write(
        f"\n+++ hang guard: {nodeid} still running {seconds:.0f} s after it started "
        f"(pytest-timeout did not stop it): stacks of worker {pid} follow, then it and "
        "the processes it started are killed +++\n"
    )
    sys.stderr.flush()
    try:
        os.kill(pid, STACK_DUMP_SIGNAL)
        time.sleep(2)
    except ProcessLookupError:
        return
    me = os.getpid()
    for child in _descendants(pid):
        if child != me:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def watch(pid: int, fd: int) -> None:
    """The watchdog process's loop over the command lines arriving on ``fd``.

    Reads the raw fd: a buffered ``readline`` after ``select`` could leave an ``arm`` and a
    ``disarm`` that arrived together half-read in its buffer, invisible to the next
    ``select``, and the watchdog would then kill a worker whose test had finished."""
    deadline: float | None = None
    nodeid = ""
    armed_at = 0.0
    pending = b""
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                return  # the worker ended
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                parts = line.decode().split(" ", 2)
                if parts[0] == "arm":
                    armed_at = time.monotonic()
                    deadline = armed_at + float(parts[1])
                    nodeid = parts[2]
                else:
                    deadline = None
        elif deadline is not None and time.monotonic() >= deadline:
            _kill_tree(pid, nodeid, time.monotonic() - armed_at)
            return


class Watchdog:
    """The worker's side: starts the watchdog process and arms it around each test."""

    def __init__(self, capture_manager: Any) -> None:
        import faulthandler

        # The real stderr, not pytest's capture file: the watchdog's report and the stack
        # dump must reach the terminal (and the CI log).
        with capture_manager.global_and_fixture_disabled():
            self._stderr = os.fdopen(os.dup(2), "w")
            self._proc = subprocess.Popen(
                [sys.executable, __file__, str(os.getpid())],
                stdin=subprocess.PIPE,
                text=True,
            )
        faulthandler.register(STACK_DUMP_SIGNAL, file=self._stderr, all_threads=True)

    def arm(self, nodeid: str, seconds: float) -> None:
        self._send(f"arm {seconds} {nodeid}")

    def disarm(self) -> None:
        self._send("disarm")

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(10)
        self._stderr.close()


def _make_no_rerun_scheduler() -> type:
    from xdist.scheduler import LoadGroupScheduling

    class LoadGroupNoRerun(LoadGroupScheduling):  # type: ignore[misc]
        def remove_node(self, node: Any) -> str | None:
            workload: OrderedDict[str, OrderedDict[str, bool]] = self.assigned_work.pop(node)
            pending = [
                (unit, nodeid)
                for unit in workload.values()
                for nodeid, completed in unit.items()
                if not completed
            ]
            if not pending:
                return None  # a normal shutdown
            unit, crashitem = pending[0]
            unit[crashitem] = True  # xdist reports it as failed; it does not run again
            for scope, work in workload.items():
                if not all(work.values()):
                    self.workqueue[scope] = work
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

    return LoadGroupNoRerun


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A test that crashes its worker is not run again."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return _make_no_rerun_scheduler()(config, log)


def _timeout_s(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Arms the hang guard's watchdog for the test's whole protocol (setup, call, teardown),
    as pytest-timeout times it."""
    config = item.config
    limit = _timeout_s(item)
    if limit <= 0:
        return (yield)
    dog: Watchdog | None = getattr(config, "_oncelog_watchdog", None)
    if dog is None:
        dog = Watchdog(config.pluginmanager.getplugin("capturemanager"))
        config._oncelog_watchdog = dog  # type: ignore[attr-defined]
        config.add_cleanup(dog.close)
    dog.arm(item.nodeid, limit + GRACE_S)
    try:
        return (yield)
    finally:
        dog.disarm()


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.stdin.fileno())
