"""Spark's zips off a Python process's path, when the same pyspark is installed.

Spark puts ``pyspark.zip`` and ``py4j-*.zip`` first on the path of every Python process
it starts (``PythonUtils.sparkPythonPath``). A zip holds no bytecode cache, so importing
pyspark from it compiles every module from source (``import pyspark.sql`` 470 ms instead
of 100 ms on the development machine), and every ``importlib.invalidate_caches()``
rereads both zip directories. Used by :mod:`oncelog.spark.daemon` and
:mod:`oncelog.spark.python_launcher`; imports nothing of pyspark itself.
"""

from __future__ import annotations

import importlib.machinery
import os

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
