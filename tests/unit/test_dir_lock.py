from __future__ import annotations

import os
from pathlib import Path

import pytest

from oncelog.storage.dir_lock import LOCK_NAME, DataDirInUse, DataDirLock


def test_second_lock_is_refused_with_the_holders_pid_and_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = DataDirLock.acquire(data)
    assert (data / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    before = sorted(p.name for p in data.iterdir())
    with pytest.raises(DataDirInUse) as info:
        DataDirLock.acquire(data)  # flock is per open file: refused within one process too
    assert info.value.pid == os.getpid()
    assert str(info.value) == f"{data} is in use by another oncelog process (pid {os.getpid()})"
    assert sorted(p.name for p in data.iterdir()) == before
    first.release()
    again = DataDirLock.acquire(data)  # released: free again
    assert again.held
    again.release()
    assert not again.held
