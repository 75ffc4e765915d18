"""The version reported by the built-in plugins and the REST root."""

from __future__ import annotations

import importlib.metadata


def oncelog_version() -> str:
    try:
        return importlib.metadata.version("oncelog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


VERSION = oncelog_version()
