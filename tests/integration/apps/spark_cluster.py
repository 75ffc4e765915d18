"""Spark outside ``local[N]``, from the pyspark wheel alone: a standalone master and worker
(``spark-class``) and a Spark Connect server (``spark-submit`` of ``SparkConnectServer``).

Each JVM runs in a session of its own (``start_new_session=True``), so that stopping it
kills everything it started (executors, Python workers) and nothing outlives the test,
also when the test fails. Their Python workers run this interpreter (``PYSPARK_PYTHON``)
with this checkout's ``src`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from oncelog.spark.hooks import HOOK_ENV
from oncelog.testing import faults

ROOT = Path(__file__).parents[3]
CONNECT_APP = str(Path(__file__).parent / "spark_connect_app.py")


def spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every Spark JVM and of the drivers: loopback only, Python workers
    running this interpreter on this checkout's code, no kill point inherited by accident."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (faults.KILL_AT_ENV, faults.KILL_SID_ENV, HOOK_ENV)
    }
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    env.update(extra or {})
    return env


class SparkProcess:
    """One Spark JVM (master, worker or Connect server) leading its own session."""

    def __init__(self, name: str, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed by stop()
        self._log.write(f"==== {' '.join(cmd)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=str(log.parent),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}): {self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {what} after {timeout} s: {self.tail()}")
            time.sleep(0.2)

    def wait_for_log(self, needle: str, timeout: float = 120.0) -> None:
        self.wait_until(lambda: needle in self.log(), timeout, repr(needle))

    def wait_for_port(self, port: int, timeout: float = 120.0) -> None:
        def listening() -> bool:
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", port)) == 0

        self.wait_until(listening, timeout, f"listener on port {port}")

    def kill(self) -> None:
        """SIGKILL the session: the JVM and everything it started."""
        faults.kill_session(self.proc.pid)
        self.proc.wait()
        self._log.close()


STANDALONE_MARKER = "<!-- run by tests/integration/test_spark_standalone.py"
CONNECT_MARKER = "<!-- run by tests/integration/test_spark_connect.py"


def docs_shell(marker: str) -> str:
    """The sh block of docs/spark.md that follows the comment starting with ``marker``."""
    text = (ROOT / "docs" / "spark.md").read_text()
    found = re.findall(re.escape(marker) + r"[^\n]*-->\n```sh\n(.*?)\n```", text, flags=re.S)
    assert len(found) == 1, f"docs/spark.md: {len(found)} sh blocks after {marker!r}"
    return str(found[0])


def docs_python(marker: str) -> str:
    """The python block of docs/spark.md after exactly the comment ``marker``."""
    text = (ROOT / "docs" / "spark.md").read_text()
    found = re.findall(re.escape(marker) + r"\n```python\n(.*?)\n```", text, flags=re.S)
    assert len(found) == 1, f"docs/spark.md: {len(found)} python blocks after {marker!r}"
    return str(found[0])


def run_docs_job(
    marker: str, cwd: Path, env: dict[str, str], timeout: float = 400
) -> subprocess.CompletedProcess[str]:
    """docs/spark.md's python block after ``marker``, as written: ``python job.py`` in a
    fresh process, with :func:`spark_env` and ``env`` (KAFKA_BOOTSTRAP, SPARK_MASTER, ...)."""
    job = cwd / "job.py"
    job.write_text(docs_python(marker) + "\n")
    return subprocess.run(
        [sys.executable, str(job)],
        cwd=cwd,
        env=spark_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def run_shell(name: str, script: str, log: Path, env: dict[str, str]) -> SparkProcess:
    """A docs block run by bash in a session of its own; bash then waits for what the
    block started in the background, so the session's leader lives as long as they do."""
    return SparkProcess(name, ["bash", "-c", script + "\nwait"], log, env)


def start_standalone(work: Path, env: dict[str, str] | None = None) -> tuple[SparkProcess, str]:
    """docs/spark.md's standalone cluster (a master and a 2-core worker), on a free port
    and with a work directory under ``work``; returns it and the master URL once the worker
    registered. Executors (and their Python workers) inherit ``env`` on top of
    :func:`spark_env`."""
    port = free_port()
    script = docs_shell(STANDALONE_MARKER)
    assert script.count("7077") == 2 and script.count("/tmp/spark-work") == 1, script
    script = script.replace("7077", str(port)).replace("/tmp/spark-work", str(work / "worker"))
    cluster = run_shell("standalone cluster", script, work / "cluster.log", spark_env(env))
    try:
        cluster.wait_for_log("Successfully registered with master")
    except BaseException:
        cluster.kill()
        raise
    return cluster, f"spark://127.0.0.1:{port}"


def ancestors(pid: int) -> list[int]:
    """pid's parent, its parent, ... up to init."""
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        out.append(pid)
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def executor_pids(cluster: SparkProcess) -> list[int]:
    """The cluster's executor JVMs (``CoarseGrainedExecutorBackend``), in its session."""
    return [
        p
        for p in faults.session_members(cluster.pid)
        if "CoarseGrainedExecutorBackend" in cmdline(p) and "java" in cmdline(p)
    ]


def start_connect_server(work: Path, *, kill_at: str | None = None) -> tuple[SparkProcess, str]:
    """docs/spark.md's Spark Connect server (the jar ships in the pyspark wheel), on a free
    port; returns it and its ``sc://`` URL once its gRPC port listens. With ``kill_at`` (a
    kill point of oncelog.testing.faults, ``<point>[@<batchId>]``) the data source
    SIGKILLs the server's whole session when a query reaches that point: under Spark
    Connect the server is the queries' driver."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    script = docs_shell(CONNECT_MARKER)
    assert script.count("15002") == 1, script
    # The documented server listens on loopback only (it runs whatever a client sends).
    assert "spark.connect.grpc.binding.address=127.0.0.1" in script, script
    script = script.replace("15002", str(port))
    env: dict[str, str] = {}
    if kill_at:
        # The session's id is its leader's pid: bash's.
        script = f"export {faults.KILL_SID_ENV}=$$\n{script}"
        env = {faults.KILL_AT_ENV: kill_at, HOOK_ENV: faults.HOOK}
    server = run_shell("connect server", script, work / "connect-server.log", spark_env(env))
    try:
        server.wait_for_port(port, timeout=180)
    except BaseException:
        server.kill()
        raise
    return server, f"sc://127.0.0.1:{port}"


class ConnectClient:
    """tests/integration/apps/spark_connect_app.py (a Spark Connect client) in a session
    of its own, its stdout read line by line."""

    def __init__(self, remote: str, bootstrap: str, log: Path, *args: str) -> None:
        cmd = [sys.executable, CONNECT_APP, "--remote", remote, "--bootstrap", bootstrap, *args]
        self.log_path = log
        self._log = open(log, "a")  # noqa: SIM115 - closed by wait()/kill()
        self._log.write(f"\n==== {' '.join(cmd)}\n")
        self._log.flush()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
            env=spark_env(),
        )
        self.lines: list[str] = []
        # A thread reads stdout, so that no line waits in a buffer that poll() cannot see.
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.strip())
        self._queue.put(None)

    def read_until(self, prefix: str, timeout: float) -> list[str]:
        """Lines printed so far, once one starts with ``prefix`` (or fail)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if line.startswith(prefix):
                return self.lines
        raise AssertionError(f"client: no {prefix!r} line; printed {self.lines}: {self.tail()}")

    def wait(self, timeout: float) -> int:
        """The exit code, once the client ended (killed after ``timeout``) and printed all."""
        try:
            self.proc.wait(timeout)
        finally:
            self.kill()
        self._reader.join(10)
        while (line := self._queue.get_nowait() if not self._queue.empty() else None) is not None:
            self.lines.append(line)
        return self.proc.returncode

    def kill(self) -> None:
        faults.kill_session(self.proc.pid)
        self.proc.wait()
        if not self._log.closed:
            self._log.close()

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-n:])
