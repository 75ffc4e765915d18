"""Unit-test fixtures shared by every module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .test_storage_support import release_opened_logs


@pytest.fixture(autouse=True)
def _release_storage_logs() -> Iterator[None]:
    """Logs opened through test_storage_support.open_log are released after each test."""
    yield
    release_opened_logs()
