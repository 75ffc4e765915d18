"""The Python workers' daemon drops Spark's zips from the path only when the same pyspark
and py4j are importable without them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from oncelog.spark.pyspark_path import installed_pyspark_path


def _site(root: Path, version: str, with_py4j: bool = True) -> Path:
    site = root / "site"
    (site / "pyspark").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "pyspark" / "version.py").write_text(f"__version__: str = '{version}'\n")
    if with_py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    return site


def _zips(root: Path, version: str) -> list[str]:
    lib = root / "lib"
    lib.mkdir()
    pyspark = lib / "pyspark.zip"
    with zipfile.ZipFile(pyspark, "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", f"__version__: str = '{version}'\n")
    py4j = lib / "py4j-0.10.9.9-src.zip"
    with zipfile.ZipFile(py4j, "w") as z:
        z.writestr("py4j/__init__.py", "")
    return [str(pyspark), str(py4j)]


def test_the_zips_go_when_the_same_pyspark_is_installed(tmp_path: Path) -> None:
    site = _site(tmp_path, "4.3.0")
    path = [str(tmp_path / "work"), *_zips(tmp_path, "4.3.0"), str(site)]
    assert installed_pyspark_path(path) == [str(tmp_path / "work"), str(site)]


def test_the_zips_stay_for_another_version_or_without_an_installed_copy(tmp_path: Path) -> None:
    zips = _zips(tmp_path, "4.3.0")
    other = _site(tmp_path / "other", "4.2.0")
    assert installed_pyspark_path([*zips, str(other)]) is None
    no_py4j = _site(tmp_path / "nopy4j", "4.3.0", with_py4j=False)
    assert installed_pyspark_path([*zips, str(no_py4j)]) is None
    assert installed_pyspark_path(zips) is None  # pyspark only in the zips
    assert installed_pyspark_path([str(other)]) is None  # no zips: nothing to do


def test_preload_imports_what_imports_and_freezes_the_heap() -> None:
    # In a fresh interpreter: the daemon's own process is what forks the workers.
    code = (
        "import gc, sys\n"
        "from oncelog.spark.daemon import preload\n"
        "got = preload(('json', 'no_such_module_here', 'oncelog.spark.writer'))\n"
        "print(got, 'oncelog.spark.writer' in sys.modules, gc.get_freeze_count() > 10000)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['json', 'oncelog.spark.writer'] True True"


def test_local_socket_defaults_use_a_private_short_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stat
    import tempfile

    from oncelog.spark import local_socket_defaults

    # pytest's tmp_path is too long for a socket directory: a short one of our own.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="ol-") as short:
        monkeypatch.setattr(tempfile, "tempdir", short)
        got = local_socket_defaults()
        assert got["spark.python.unix.domain.socket.enabled"] == "true"
        where = Path(got["spark.python.unix.domain.socket.dir"])
        assert where.parent == Path(short) and stat.S_IMODE(where.stat().st_mode) == 0o700
        # A directory too long for sockaddr_un (108 bytes with Spark's socket name): TCP.
        deep = Path(short) / ("d" * 70)
        deep.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(deep))
        assert local_socket_defaults() == {}
        assert list(deep.iterdir()) == []


FORKED_WORK = """
import os, sys
from oncelog.spark.daemon import preload
preload()
# The threads the preload leaves: jemalloc's background thread (pyarrow's) and OpenBLAS's
# worker (numpy's). Both libraries restore themselves in a forked child (pthread_atfork);
# the children below must allocate, compute with threads and exit, as forked workers do.
children = []
for i in range(12):
    pid = os.fork()
    if pid == 0:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        a = pa.array([bytes(100)] * 20000, pa.binary())
        total = pc.sum(pc.binary_length(a)).as_py()
        m = np.ones((200, 200)) @ np.ones((200, 200))
        os._exit(0 if total == 2_000_000 and m[0, 0] == 200 else 3)
    children.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
threads = len(os.listdir("/proc/self/task"))
print(codes == [0] * 12, threads > 1)
"""


def test_workers_forked_after_the_preload_run_arrow_and_numpy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FORKED_WORK], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    # (threads > 1: the preload does leave native threads behind; forking still works)
    assert out.stdout.strip() == "True True", out.stdout + out.stderr


def test_a_worker_whose_connection_is_closed_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark.daemon

    from oncelog.spark.daemon import quiet_closed_workers

    def closed(sock: object, authenticated: bool) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(pyspark.daemon, "worker", closed)
    quiet_closed_workers()
    assert pyspark.daemon.worker(None, False) == 1  # ends pyspark's per-worker loop

    def buggy(sock: object, authenticated: bool) -> int:
        raise ValueError("a real failure")

    monkeypatch.setattr(pyspark.daemon, "worker", buggy)
    quiet_closed_workers()
    with pytest.raises(ValueError):
        pyspark.daemon.worker(None, False)
