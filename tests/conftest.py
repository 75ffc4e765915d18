"""Suite-wide hooks: make test runs the suite under pytest-xdist (see the Makefile)."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Hooks: a hung test neither stalls the suite nor runs again (see the module).
from tests.hang_guard import (  # noqa: F401
    pytest_runtest_protocol,
    pytest_xdist_make_scheduler,
)

# The suite runs in 4 workers on 2 cores: a generated example may wait for the CPU far
# longer than Hypothesis' 200 ms default deadline, which would fail a correct test.
# Tests that set their own deadline keep it.
settings.register_profile("oncelog", deadline=None)
settings.load_profile("oncelog")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` on pytest >= 9.2: keep each ``xdist_group`` on one worker.

    xdist (3.8) tells the controller a test's group by renaming the test to
    ``NODEID@GROUP`` on the worker, through ``item._nodeid``. pytest 9.2 keeps the id in
    ``item._id`` instead, so that rename is lost and the groups are silently spread over
    all workers. This applies it where xdist's did not take (and does nothing once it
    does); it fails the run rather than run the groups concurrently unnoticed.
    """
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue
        item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(f"cannot put {item.nodeid} into xdist group {suffix[1:]}")
