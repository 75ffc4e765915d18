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


def spark_class(main_class: str, *args: str) -> list[str]:
    return [str(Path(spark_home()) / "bin" / "spark-class"), main_class, *args]


def start_master(work: Path) -> tuple[SparkProcess, str]:
    """A standalone master on loopback; returns it and its spark:// URL, once it leads."""
    port, ui = free_port(), free_port()
    master = SparkProcess(
        "master",
        spark_class(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ),
        work / "master.log",
        spark_env(),
    )
    try:
        master.wait_for_log("I have been elected leader")
    except BaseException:
        master.kill()
        raise
    return master, f"spark://127.0.0.1:{port}"


def start_worker(
    work: Path, master_url: str, *, cores: int = 2, env: dict[str, str] | None = None
) -> SparkProcess:
    """A standalone worker registered with the master. Its executors (and their Python
    workers) inherit ``env`` on top of :func:`spark_env`."""
    (work / "worker").mkdir(exist_ok=True)
    worker = SparkProcess(
        "worker",
        spark_class(
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            "2g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(work / "worker"),
            master_url,
        ),
        work / "worker.log",
        spark_env(env),
    )
    try:
        worker.wait_for_log("Successfully registered with master")
    except BaseException:
        worker.kill()
        raise
    return worker


def children(pid: int) -> list[int]:
    """Child processes of pid, started by any of its threads (a JVM forks from many)."""
    out = []
    for name in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            with open(f"/proc/{pid}/task/{name}/children") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return out


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


def executor_pids(worker: SparkProcess) -> list[int]:
    """The worker's executor JVMs: its ``CoarseGrainedExecutorBackend`` java children."""
    return [
        p
        for p in children(worker.pid)
        if "CoarseGrainedExecutorBackend" in cmdline(p) and "java" in cmdline(p)
    ]


def start_connect_server(
    work: Path, *, master: str = "local[2]", kill_at: str | None = None
) -> tuple[SparkProcess, str]:
    """A Spark Connect server (the jar ships in the pyspark wheel); returns it and its
    ``sc://`` URL once its gRPC port listens. With ``kill_at`` (a kill point of
    oncelog.testing.faults, ``<point>[@<batchId>]``) the data source SIGKILLs the server's
    whole session when a query reaches that point: under Spark Connect the server is the
    queries' driver."""
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env: dict[str, str] = {}
    cmd = [
        str(Path(spark_home()) / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        master,
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "spark-internal",
    ]
    if kill_at:
        # The session's id is the leader's pid: the shell's, which exec keeps for the JVM.
        cmd = ["sh", "-c", f'{faults.KILL_SID_ENV}=$$ exec "$@"', "sh", *cmd]
        env = {faults.KILL_AT_ENV: kill_at, HOOK_ENV: faults.HOOK}
    server = SparkProcess("connect-server", cmd, work / "connect-server.log", spark_env(env))
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
