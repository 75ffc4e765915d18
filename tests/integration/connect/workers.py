"""Connect worker processes (``oncelog connect worker``) for the cluster tests, and a
small REST client."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oncelog.connect.runtime.plugins import FILE_STREAM_PLUGIN

JOINED = re.compile(r"joined generation (\d+) as (leader|follower)")
READY_PREFIX = "oncelog connect worker ready on "
REBALANCE = "conflicting operation (e.g. worker rebalance)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_settings(bootstrap: str, group: str, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "heartbeat.interval.ms": "500",
        "session.timeout.ms": "6000",
        "rebalance.timeout.ms": "20000",
        "scheduled.rebalance.max.delay.ms": "3000",
        "offset.flush.interval.ms": "500",
        "task.shutdown.graceful.timeout.ms": "3000",
        # The test connectors and the FileStream ones: only registered plugins resolve.
        "plugin.path": f"tests.integration.connect.eos_connectors,{FILE_STREAM_PLUGIN}",
        **extra,
    }


class WorkerProcess:
    """One ``oncelog connect worker`` subprocess; its output is kept in ``lines``."""

    def __init__(
        self,
        settings: dict[str, str],
        log_path: Path,
        *,
        tls: ssl.SSLContext | None = None,
        auth: tuple[str, str] | None = None,
    ) -> None:
        """``tls``: the worker listens on https, and requests use this client context;
        ``auth``: requests carry these basic-auth credentials."""
        self.settings = dict(settings)
        self.port = free_port()
        scheme = "https" if tls is not None else "http"
        self.settings.setdefault("listeners", f"{scheme}://127.0.0.1:{self.port}")
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.tls = tls
        self.headers = {"Content-Type": "application/json"}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.ready = threading.Event()

    def start(self, timeout_s: float = 60, *, wait_ready: bool = True) -> WorkerProcess:
        args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        self.lines = []
        self.ready.clear()
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=open(self.log_path, "a"),  # noqa: SIM115 - closed with the process
            text=True,
            env=dict(os.environ),
        )
        threading.Thread(target=self._pump, daemon=True).start()
        if wait_ready and not self.ready.wait(timeout_s):
            self.kill()
            raise AssertionError(f"worker not ready: {self.lines}\n{self.log_tail()}")
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(READY_PREFIX):
                self.ready.set()

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def terminate(self, timeout_s: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    # -- REST ------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: bytes | None = None,
        *,
        retry_rebalance_s: float = 30,
    ) -> tuple[int, Any]:
        """One request; a 409 for a rebalance in progress is retried for up to
        ``retry_rebalance_s``, as Kafka's clients are told to."""
        deadline = time.monotonic() + retry_rebalance_s
        while True:
            status, answer = self._call_once(method, path, body, raw)
            if status != 409 or REBALANCE not in str(answer) or time.monotonic() > deadline:
                return status, answer
            time.sleep(0.2)

    def _call_once(self, method: str, path: str, body: Any, raw: bytes | None) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers=self.headers
        )
        try:
            with urllib.request.urlopen(request, timeout=100, context=self.tls) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None

    def get(self, path: str) -> Any:
        status, body = self.call("GET", path)
        assert status == 200, (status, body)
        return body


def wait_for(check: Callable[[], Any], timeout_s: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: last {last!r}")


def roles(workers: list[WorkerProcess]) -> dict[str, tuple[int, str]]:
    """Each worker's last (generation, role) from its log."""
    out = {}
    for worker in workers:
        found = JOINED.findall(worker.log_path.read_text())
        if found:
            out[worker.url] = (int(found[-1][0]), found[-1][1])
    return out


def leader_and_followers(workers: list[WorkerProcess]) -> tuple[WorkerProcess, list[WorkerProcess]]:
    def settled() -> Any:
        seen = roles(workers)
        generations = {g for g, _ in seen.values()}
        leaders = [w for w in workers if seen.get(w.url, (0, ""))[1] == "leader"]
        return len(seen) == len(workers) and len(generations) == 1 and len(leaders) == 1 and leaders

    leader = wait_for(settled, 60, "one leader")[0]
    return leader, [w for w in workers if w is not leader]
