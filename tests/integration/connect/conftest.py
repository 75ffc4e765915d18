"""A private PostgreSQL server for the connector tests.

Debian's server binaries (``scripts/ensure-postgres.sh`` installs them) run on a free
port in a temporary directory. ``initdb`` and ``pg_ctl`` refuse to run as root, so
as root they run as the ``postgres`` user, which owns the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin_dir() -> Path:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
    )
    if not candidates:
        raise RuntimeError("PostgreSQL server binaries not found: run scripts/ensure-postgres.sh")
    return candidates[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def private_postgres() -> Iterator[str]:
    """Run a server in a temp dir; yields its base URL (``postgresql://postgres@127.0.0.1:PORT``)."""
    bin_dir = _bin_dir()
    base = Path(tempfile.mkdtemp(prefix="oncelog-pg-"))
    as_root = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(base, "postgres", "postgres")
    data, log = base / "data", base / "server.log"
    port = _free_port()
    subprocess.run(
        [
            *run_as,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    options = (
        f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    )
    subprocess.run(
        [
            *run_as,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(log),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*run_as, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The base URL of a running server (``postgresql://postgres@127.0.0.1:PORT``)."""
    with private_postgres() as url:
        yield url


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A fresh database per test."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{postgres_server}/{name}"
    finally:
        with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
