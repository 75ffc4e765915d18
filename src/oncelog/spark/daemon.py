"""Spark's Python worker daemon (``spark.python.daemon.module``): pyspark's own daemon
(``pyspark.daemon.manager``, unchanged), started in a prepared process.

* pyspark comes from its installed package rather than Spark's zips, when the same
  pyspark is installed (:mod:`oncelog.spark.pyspark_path`); elsewhere nothing changes.
* The modules the data source's workers need are imported, and frozen out of the
  garbage collector's sight, before any worker is forked (:func:`preload`).
* A worker whose connection Spark has closed ends without a traceback
  (:func:`quiet_closed_workers`).

It also runs Spark's planner daemons (``pyspark.daemon <worker module>``) when Spark starts
them through ``oncelog-spark-python`` (:mod:`oncelog.spark.python_launcher`).
:func:`oncelog.spark.spark_session` sets it; with another session builder set
``spark.python.daemon.module`` to ``oncelog.spark.daemon`` (the module must not import
pyspark before the path is fixed, which is why it lives apart from the data source).
"""

from __future__ import annotations

import sys
from typing import Any

from oncelog.spark.pyspark_path import installed_pyspark_path

# What a Python worker of the oncelog data source imports (about 1,000 modules: pyspark's
# worker and Arrow serializers, pyarrow, and pandas, which pyarrow's pandas shim imports at
# its first ``pa.array``), imported once here instead of in every forked worker.
PRELOAD = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyarrow",
    "pandas",
    "oncelog.spark.reader",
    "oncelog.spark.writer",
)


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules`` (those that import; an optional one may be missing) and move
    everything allocated so far out of the collector's sight (``gc.freeze``); the names
    imported.

    pyspark's daemon forks a worker per Python task slot and, when workers are reused,
    runs a full ``gc.collect()`` after every task (``pyspark.daemon.manager``). Without
    this, each new worker spent about 0.4 s CPU importing, and every collection walked
    the ~90,000 objects of those modules: together about a third of a streaming
    pipeline's worker CPU. Frozen objects stay shared with the forked workers (copy on
    write) and are skipped by their collections.

    pyspark's own daemon imports pyarrow and pandas only after the fork, because they
    start native threads, and a process that forks with threads may hand its child a lock
    one of them held. The threads they start are jemalloc's background thread (pyarrow's
    allocator) and OpenBLAS's worker (numpy's); both libraries make themselves safe across
    ``fork()`` with ``pthread_atfork`` handlers (jemalloc takes its locks before the fork;
    OpenBLAS shuts its pool down and restarts it in the child), as prefork servers that
    load numpy and pyarrow rely on. Importing them in each worker instead (tried: freezing
    after the worker's own imports) cost ~70 ms more per 300-record micro-batch and ~25%
    more worker CPU."""
    import gc
    import importlib

    imported = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        imported.append(name)
    gc.collect()
    gc.freeze()
    return imported


def quiet_closed_workers() -> None:
    """A worker whose connection the JVM has closed exits without a traceback.

    Spark closes a reused worker's connection when the worker has idled for a minute and
    when the session stops (``PythonWorkerFactory``). The worker, waiting for its next
    task, reports the end of input and flushes that report into the closed connection:
    over a Unix domain socket the flush fails at once with ``BrokenPipeError``, which
    pyspark's daemon prints as a traceback (over TCP the first write after the peer's close
    still succeeds). Nobody is left to read anything from such a worker, whatever it was
    doing, so it ends quietly (exit code 1 stops pyspark's per-worker loop)."""
    import pyspark.daemon

    run = pyspark.daemon.worker

    def worker(sock: Any, authenticated: bool) -> int:
        try:
            return run(sock, authenticated)
        except BrokenPipeError:
            return 1

    pyspark.daemon.worker = worker


def main() -> None:
    kept = installed_pyspark_path(sys.path)
    if kept is not None:
        sys.path[:] = kept
    preload()
    quiet_closed_workers()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
