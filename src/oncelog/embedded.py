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

READY = "oncelog broker ready on "


class EmbeddedBroker:
    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        settings: dict[str, str] | None = None,
        log_path: Path | None = None,
        log_level: str = "INFO",
    ) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-")
            data_dir = Path(self._tmp.name) / "data"
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.settings = dict(settings or {})
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}-broker.log"
        self.log_level = log_level
        self.proc: subprocess.Popen[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        cmd = [
            sys.executable, "-m", "oncelog.cli.main", "broker",
            "--data-dir", str(self.data_dir),
            "--listen", f"{self.host}:{self.port}",
            "--log-level", self.log_level,
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True)
        log_file.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith(READY):
                    self.port = int(line[len(READY):].strip().rpartition(":")[2])
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
