"""The version reported by the built-in plugins and the REST root, and the commit it
was built from (Kafka's ``AppInfoParser``): the source checkout's git commit when
running from one, else ``unknown``."""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess


def oncelog_version() -> str:
    try:
        return importlib.metadata.version("oncelog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def source_commit() -> str:
    checkout = pathlib.Path(__file__).resolve().parents[4]
    if not (checkout / ".git").exists():
        return "unknown"
    try:
        result = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short=16", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() or "unknown"


VERSION = oncelog_version()
COMMIT = source_commit()
