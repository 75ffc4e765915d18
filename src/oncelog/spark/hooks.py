"""Observation points of the data source: ``point()`` at each stage of a micro-batch's
commit (for fault-injection tests) and ``trace()`` diagnostics.

The points are those of the one hook registry (``oncelog.hooks``), named ``spark.<point>``.
By default a point does nothing. A test harness names a function in ``ONCELOG_SPARK_HOOK``
(``module:function``) in the driver's environment, which Spark's JVM and Python workers
inherit; the data source then calls it with (point, batch id) in whichever process reaches
the point. The data source never imports the harness itself (see oncelog.testing.faults).

Points, in the order a micro-batch reaches them:

* ``task-after-flush``: a write task (partition 0) prepared its transaction (flushed, not
  committed) and is about to return its commit message;
* ``commit-before-decision``: the driver's commit got all messages, no decision yet;
* ``commit-after-decision``: the decision is durable, no transaction committed yet;
* ``commit-mid-endtxn``: the first transaction of the decision is committed, not the rest;
* ``commit-after-endtxn``: every transaction is committed, Spark has not yet recorded the
  batch in its commit log (so the batch is replayed after the restart).
"""

from __future__ import annotations

import importlib
import os
import sys
import time

from oncelog import hooks

HOOK_ENV = "ONCELOG_SPARK_HOOK"
TRACE_ENV = "ONCELOG_SPARK_TRACE"
POINTS = (
    "task-after-flush",
    "commit-before-decision",
    "commit-after-decision",
    "commit-mid-endtxn",
    "commit-after-endtxn",
)


def point(name: str, batch_id: int) -> None:
    """The sink reached ``name`` for ``batch_id``: the ``spark.<name>`` point of the hook
    registry (``oncelog.hooks``)."""
    assert name in POINTS, name
    hooks.point(f"spark.{name}", batch_id=batch_id)


def _from_environment(name: str) -> hooks.Hook:
    """The hook of point ``name``: the function ``ONCELOG_SPARK_HOOK`` names, if any (read
    at each call: a driver arms it after this module is imported)."""

    def call(*, batch_id: int) -> None:
        spec = os.environ.get(HOOK_ENV)
        if spec:
            module, _, func = spec.partition(":")
            getattr(importlib.import_module(module), func)(name, batch_id)

    return call


# Spark's workers are processes of their own: the environment carries their hook.
for _name in POINTS:
    hooks.install(f"spark.{_name}", _from_environment(_name))


def trace(message: str) -> None:
    """Timestamped diagnostics to stderr (the Spark driver's log in local mode) when
    ONCELOG_SPARK_TRACE is set."""
    if os.environ.get(TRACE_ENV):
        print(
            f"[oncelog.spark {time.time():.3f} pid={os.getpid()}] {message}",
            file=sys.stderr,
            flush=True,
        )
