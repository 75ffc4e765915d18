"""Start and stop a broker subprocess: the embedded default for demos, tests
and benchmarks. A real process, so tests can SIGKILL it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

READY = "oncelog broker ready on "
# Printed before READY when metrics.listener is set.
HTTP_READY = "oncelog metrics and console on "
# `oncelog demo` turns the metrics listener and console on, on a free port it prints.
DEMO_METRICS_LISTENER = "http://127.0.0.1:0"


def parse_ready_line(line: str) -> dict[str, int]:
    """``oncelog broker ready on H:P (NAME), H:P (NAME/PROTO)`` -> {NAME: P}."""
    ports: dict[str, int] = {}
    for entry in line[len(READY) :].strip().split(", "):
        address, _, label = entry.partition(" (")
        name = label.rstrip(")").split("/")[0] or "PLAINTEXT"
        ports[name] = int(address.rpartition(":")[2])
    return ports


class EmbeddedBroker:
    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        settings: dict[str, str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        log_level: str = "INFO",
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-")
            data_dir = Path(self._tmp.name) / "data"
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.settings = dict(settings or {})
        self.log_path = (
            Path(log_path)
            if log_path is not None
            else self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        )
        self.log_level = log_level
        self.config_file = None if config_file is None else Path(config_file)
        self.proc: subprocess.Popen[str] | None = None
        # listener name -> bound port, from the ready line
        self.ports: dict[str, int] = {}
        # The metrics and console URL (http://HOST:PORT) when metrics.listener is set.
        self.http_url: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        cmd = [
            sys.executable,
            "-m",
            "oncelog.cli.main",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--log-level",
            self.log_level,
        ]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        elif "listeners" not in self.settings:
            cmd += ["--listen", f"{self.host}:{self.port}"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True)
        log_file.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = readable(self.proc.stdout, 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith(HTTP_READY):
                    self.http_url = line[len(HTTP_READY) :].strip()
                    # The ready line follows at once, maybe already in the pipe's buffer
                    # where select() cannot see it.
                    line = self.proc.stdout.readline()
                if line.startswith(READY):
                    self.ports = parse_ready_line(line)
                    self.port = next(iter(self.ports.values()))
                    return self
                if not line and self.proc.poll() is not None:
                    break
            elif self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError(f"broker did not start; see {self.log_path}:\n{self.tail_log()}")

    def tail_log(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self._close_pipe()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush or snapshot."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._close_pipe()

    def restart(self) -> EmbeddedBroker:
        self.stop()
        return self.start()

    def _close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def readable(stream: Any, timeout_s: float) -> bool:
    """Whether ``stream`` has data within ``timeout_s``. poll(), not select(): a long
    test session may hold file descriptors above select()'s limit of 1024."""
    poller = select.poll()
    poller.register(stream, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(timeout_s * 1000))
