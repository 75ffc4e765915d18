"""One process per data directory (Kafka's LogManager locks its log dirs first): a second
broker or an offline tool that writes is refused at once, and changes nothing."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

from oncelog.embedded import EmbeddedBroker

from .helpers import consume, create_topic, produce


def tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def oncelog(*args: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return done, time.monotonic() - started


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_second_broker_on_a_live_data_dir_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data) as first:
        create_topic(first.bootstrap, "kept")
        produce(first.bootstrap, "kept", [(None, b"v%d" % i, 0) for i in range(100)])
        before = tree_hash(data)
        assert first.proc is not None
        done, took = oncelog("broker", "--data-dir", str(data), "--listen", "127.0.0.1:0")
        assert done.returncode == 1, done.stderr
        assert errors(done.stderr) == [
            f"error: {data} is in use by another oncelog process (pid {first.proc.pid})"
        ]
        assert took < 3.0  # the process start is most of it; the refusal itself is at once
        assert tree_hash(data) == before
        # The first broker is untouched: it still serves and takes writes.
        produce(first.bootstrap, "kept", [(None, b"after", 0)])
        assert [m.value() for m in consume(first.bootstrap, "kept", 1, 101)][-1] == b"after"
        # An offline tool that writes the directory is refused the same way.
        done, _ = oncelog("users", "add", "alice", "--password", "pw", "--data-dir", str(data))
        assert done.returncode == 1
        assert errors(done.stderr)[0].startswith(
            f"error: {data} is in use by another oncelog process (pid {first.proc.pid})"
        )
        assert tree_hash(data) == tree_hash(
            data
        ) and "meta/scram_credentials.json" not in tree_hash(data)
        first.kill()  # SIGKILL: the kernel drops the lock with the process
        second = EmbeddedBroker(data).start()
        try:
            assert len(consume(second.bootstrap, "kept", 1, 101)) == 101
        finally:
            second.stop()


def test_port_conflict_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data) as first:
        before = tree_hash(data)
        # Same data dir and the port in use: the listener fails first, the lock is never
        # reached, nothing in the directory is read or written.
        done, _ = oncelog("broker", "--data-dir", str(data), "--listen", first.bootstrap)
        assert done.returncode == 1
        assert errors(done.stderr) == [
            f"error: cannot listen on {first.bootstrap} (PLAINTEXT): address already in use"
        ]
        assert tree_hash(data) == before
        # A fresh data dir with a taken metrics port: not even created.
        fresh = tmp_path / "fresh"
        done, _ = oncelog(
            "broker", "--data-dir", str(fresh), "--listen", "127.0.0.1:0",
            "--set", f"metrics.listener=http://{first.bootstrap}",
        )  # fmt: skip
        assert done.returncode == 1
        assert errors(done.stderr) == [
            f"error: cannot listen on {first.bootstrap} (metrics.listener): address already in use"
        ]
        assert not fresh.exists()
