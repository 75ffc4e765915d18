"""oncelog-spark-python runs ``-m module`` as ``python -m`` does, minus Spark's zips, and
hands any other command line to the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark

from oncelog.spark.python_launcher import installed_launcher

# make test installs the package (pip install -e), which installs the launcher script:
# its absence is a failure, not a reason to skip.
LAUNCHER = installed_launcher()


def test_the_launcher_is_installed() -> None:
    assert LAUNCHER is not None, "oncelog-spark-python is not installed (pip install -e .)"


PROBE = """
import os, sys, pyspark
print(repr(sys.argv[1:]), __name__, sys.path[0], os.path.realpath(pyspark.__file__))
print(any(p.endswith(('pyspark.zip', '-src.zip')) for p in sys.path))
sys.exit(int(sys.argv[-1]))
"""


def spark_zips(tmp_path: Path) -> str:
    """A pyspark.zip of the installed version and a py4j zip, as Spark's PYTHONPATH has."""
    lib = tmp_path / "lib"
    lib.mkdir()
    version = (Path(pyspark.__file__).parent / "version.py").read_text()
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", version)
    with zipfile.ZipFile(lib / "py4j-0.10.9.9-src.zip", "w") as z:
        z.writestr("py4j/__init__.py", "")
    return f"{lib / 'pyspark.zip'}:{lib / 'py4j-0.10.9.9-src.zip'}"


def test_a_module_runs_as_python_m_without_the_zips(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe_mod.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": spark_zips(tmp_path)}
    assert LAUNCHER is not None
    out = subprocess.run(
        [LAUNCHER, "-m", "probe_mod", "a", "3"], cwd=work, env=env, capture_output=True, text=True
    )
    assert out.returncode == 3, out.stderr
    assert out.stderr == ""  # no runpy warning, no traceback
    first, second = out.stdout.splitlines()
    # (real paths: the virtualenv may be reached through a symlink)
    assert first == f"['a', '3'] __main__ {work} {os.path.realpath(pyspark.__file__)}"
    assert second == "False"
    # The interpreter itself, with the zips first, imports the (empty) pyspark of the zip.
    plain = subprocess.run(
        [sys.executable, "-m", "probe_mod", "0"], cwd=work, env=env, capture_output=True, text=True
    )
    assert plain.stdout.splitlines()[1] == "True"


def test_other_command_lines_go_to_the_interpreter(tmp_path: Path) -> None:
    assert LAUNCHER is not None
    version = subprocess.run([LAUNCHER, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"Python {sys.version.split()[0]}"
    code = subprocess.run(
        [LAUNCHER, "-c", "import os, sys; print(os.path.realpath(sys.executable))"],
        capture_output=True,
        text=True,
    )
    assert code.stdout.strip() == os.path.realpath(sys.executable)
    missing = subprocess.run(
        [LAUNCHER, "-m", "no_such_module_here"], cwd=tmp_path, capture_output=True, text=True
    )
    assert missing.returncode == 1 and "No module named no_such_module_here" in missing.stderr


def test_the_launcher_is_found_through_a_linked_virtualenv(tmp_path: Path) -> None:
    # A virtualenv reached through a symlink (as CI worktrees link one): sys.executable
    # names the link, the script's shebang the real directory.
    assert LAUNCHER is not None
    venv = Path(sys.prefix)
    (tmp_path / "linked").symlink_to(venv, target_is_directory=True)
    python = tmp_path / "linked" / "bin" / Path(sys.executable).name
    code = (
        "from oncelog.spark.python_launcher import installed_launcher; print(installed_launcher())"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "linked" / "bin" / "oncelog-spark-python")


def test_spark_planner_daemons_run_as_oncelog_daemon() -> None:
    from oncelog.spark.python_launcher import launched_module

    assert launched_module("pyspark.daemon") == "oncelog.spark.daemon"
    assert launched_module("pyspark.worker") == "pyspark.worker"
    assert launched_module("pyspark.sql.streaming.python_streaming_source_runner") == (
        "pyspark.sql.streaming.python_streaming_source_runner"
    )
    # As Spark starts one: it writes its port (4 bytes) and exits when stdin closes.
    assert LAUNCHER is not None
    out = subprocess.run(
        [LAUNCHER, "-m", "pyspark.daemon", "pyspark.sql.worker.lookup_data_sources"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert len(out.stdout) == 4 and 0 < int.from_bytes(out.stdout, "big") < 65536, out
    assert b"Traceback" not in out.stderr, out.stderr
