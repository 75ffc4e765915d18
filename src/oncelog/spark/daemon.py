"""Spark's Python worker daemon (``spark.python.daemon.module``), importing pyspark from
its installed package.

Spark puts ``pyspark.zip`` and ``py4j-*.zip`` first on every Python worker's path
(``PythonUtils.sparkPythonPath``), so a worker compiles pyspark from the zip's sources
(zips hold no bytecode cache: ``import pyspark.sql`` 470 ms instead of 100 ms on the
development machine), and every ``importlib.invalidate_caches()``, which pyspark's
worker runs when a task adds to the path, rereads both zip directories (about 50 ms).
When the same pyspark is installed in the worker's Python (a pip-installed pyspark, as
:func:`oncelog.spark.spark_session` uses), the zips add nothing: this daemon drops them
from the path and then runs pyspark's own daemon (``pyspark.daemon.manager``) unchanged.
Where pyspark is not installed apart from the zips it changes nothing.

:func:`oncelog.spark.spark_session` sets it; with another session builder set
``spark.python.daemon.module`` to ``oncelog.spark.daemon`` (the module must not import
pyspark before the path is fixed, which is why it lives apart from the data source).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

SPARK_ARCHIVES = ("pyspark.zip", "py4j-")


def installed_pyspark_path(path: list[str]) -> list[str] | None:
    """``path`` without Spark's zip archives, if pyspark and py4j import from what is left
    and that pyspark is the version in the archive; else None (keep the path)."""
    kept = [p for p in path if not _is_spark_archive(p)]
    if len(kept) == len(path):
        return None
    finder = importlib.machinery.PathFinder
    pyspark, py4j = finder.find_spec("pyspark", kept), finder.find_spec("py4j", kept)
    if pyspark is None or py4j is None or pyspark.origin is None:
        return None
    archive = next((p for p in path if p.endswith("pyspark.zip")), None)
    if archive is not None and _version(archive) != _installed_version(pyspark.origin):
        return None
    return kept


def _is_spark_archive(entry: str) -> bool:
    name = os.path.basename(entry)
    return entry.endswith(".zip") and name.startswith(SPARK_ARCHIVES)


def _version(archive: str) -> str | None:
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z:
            return _parse_version(z.read("pyspark/version.py").decode())
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_version(init_file: str) -> str | None:
    try:
        with open(os.path.join(os.path.dirname(init_file), "version.py")) as f:
            return _parse_version(f.read())
    except OSError:
        return None


def _parse_version(source: str) -> str | None:
    for line in source.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return None


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
    write) and are skipped by their collections."""
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


def main() -> None:
    kept = installed_pyspark_path(sys.path)
    if kept is not None:
        sys.path[:] = kept
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
