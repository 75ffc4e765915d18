from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncelog.embedded import EmbeddedBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", log_level="INFO").start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
