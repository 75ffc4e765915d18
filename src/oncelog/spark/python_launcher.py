"""``oncelog-spark-python``: the interpreter :func:`oncelog.spark.spark_session` gives Spark
for its Python processes (``PYSPARK_PYTHON``), importing pyspark from its installed package.

Spark starts every Python process it needs as ``<PYSPARK_PYTHON> -m <module>``, with
``pyspark.zip`` and ``py4j-*.zip`` first on ``PYTHONPATH`` (``PythonWorkerFactory``,
``PythonUtils.sparkPythonPath``). A zip holds no bytecode cache, so each such process
compiles pyspark from source. Most of them are long-lived daemons, but the reader of a
Python streaming source (``python_streaming_source_runner``) is a fresh process for every
query, started before its first micro-batch: its imports took about 0.55 s from the zips
and 0.15 s from the package, which made up half the time between a query's ``start()``
and its first batch.

This launcher takes the zips off ``sys.path`` when the same pyspark and py4j are installed
(the rule of :func:`oncelog.spark.pyspark_path.installed_pyspark_path`), then runs the module
as ``python -m`` would; ``pyspark.daemon`` (how Spark starts its planner daemons) runs as
:mod:`oncelog.spark.daemon`. Any other command line is handed to the interpreter unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys

from oncelog.spark.pyspark_path import installed_pyspark_path

SCRIPT = "oncelog-spark-python"


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        # Not Spark's form: behave as the interpreter itself (``--version``, ``-c``, scripts).
        os.execv(sys.executable, [sys.executable, *args])
    module = launched_module(args[1])
    # As ``python -m``: the working directory, not the script's, heads the path.
    if not sys.flags.safe_path and sys.path:
        sys.path[0] = os.getcwd()
    kept = installed_pyspark_path(sys.path)
    if kept is not None:
        sys.path[:] = kept
    sys.argv = [sys.argv[0], *args[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def launched_module(module: str) -> str:
    """The module to run for Spark's ``-m module``: Spark's planner daemons
    (``pyspark.daemon <worker module>``) run as :mod:`oncelog.spark.daemon`, which runs
    pyspark's daemon after the same preparation as the task workers'; anything else as
    named."""
    return "oncelog.spark.daemon" if module == "pyspark.daemon" else module


def installed_launcher() -> str | None:
    """The path of this environment's ``oncelog-spark-python``, if it is installed for the
    running interpreter; else None."""
    import sysconfig

    path = os.path.join(sysconfig.get_path("scripts"), SCRIPT)
    if not os.access(path, os.X_OK):
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline().strip()
    except OSError:
        return None
    # The script runs the interpreter that installed it: only that one imports this oncelog.
    # Its directory may be reached through a symlink (a linked virtualenv); the interpreter
    # itself is compared by name, since a virtualenv's python links to its base one.
    shebang = os.fsdecode(first[2:]) if first.startswith(b"#!") else ""
    same = shebang == sys.executable or (
        os.path.basename(shebang) == os.path.basename(sys.executable)
        and os.path.realpath(os.path.dirname(shebang))
        == os.path.realpath(os.path.dirname(sys.executable))
    )
    return path if same else None
