"""The leader's rounds of zombie fencing over a config state fed record by record: what
is fenced, what is written, shared rounds, and cancellation by new task configs."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence

import pytest

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed.errors import NotLeaderError
from oncelog.connect.distributed.leader_fencing import LeaderFencing
from oncelog.connect.storage.config_records import (
    ConfigRecord,
    ConnectorConfigRecord,
    TaskCountRecord,
    task_config_records,
)
from oncelog.connect.storage.config_state import ConfigState

CONFIG = {"connector.class": "VerifiableSource"}


class Cluster:
    """A config topic as a list of records, its state, and the fencing calls made."""

    def __init__(self, *records: ConfigRecord) -> None:
        self.state = ConfigState()
        self.fenced: list[tuple[str, ...]] = []
        self.release = threading.Event()
        self.release.set()
        self.leading = True
        for record in records:
            self.append(record)

    def append(self, record: ConfigRecord) -> None:
        self.state.apply(self.state.offset, record)

    def fence(self, connector: str, config: Mapping[str, str], ids: Sequence[str]) -> None:
        assert self.release.wait(10)
        self.fenced.append(tuple(ids))

    def on_herder(self, fn: Callable[[], None]) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        try:
            fn()
            future.set_result(None)
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def leader(self) -> LeaderFencing:
        return LeaderFencing(
            "g",
            self.state.snapshot,
            lambda: None,
            lambda name, count: self.append(TaskCountRecord(name, count)),
            self.on_herder,
            self.fence,
            self.still_leader,
        )

    def still_leader(self) -> None:
        if not self.leading:
            raise NotLeaderError("http://new-leader:8083/")

    def history(self) -> tuple[dict[str, int], frozenset[str]]:
        snapshot = self.state.snapshot()
        return snapshot.task_count_records, snapshot.pending_fencing


def _tasks(n: int) -> list[ConfigRecord]:
    return task_config_records("src", [{"n": str(i)} for i in range(n)])


def test_first_generation_writes_the_record_without_fencing() -> None:
    cluster = Cluster(ConnectorConfigRecord("src", CONFIG), *_tasks(3))
    cluster.leader().fence_zombies("src", CONFIG).result(5)
    assert cluster.fenced == []
    assert cluster.history() == ({"src": 3}, frozenset())


def test_reconfiguration_fences_the_previous_generation_then_writes() -> None:
    cluster = Cluster(
        ConnectorConfigRecord("src", CONFIG), *_tasks(3), TaskCountRecord("src", 3), *_tasks(1)
    )
    leader = cluster.leader()
    cluster.release.clear()
    first = leader.fence_zombies("src", CONFIG)
    second = leader.fence_zombies("src", CONFIG)  # a concurrent request shares the round
    assert second is first and not first.done()
    cluster.release.set()
    first.result(5)
    assert cluster.fenced == [("g-src-0", "g-src-1", "g-src-2")]
    assert cluster.history() == ({"src": 1}, frozenset())
    # Fenced already: nothing more.
    leader.fence_zombies("src", CONFIG).result(5)
    assert cluster.fenced == [("g-src-0", "g-src-1", "g-src-2")]


def test_new_task_configs_cancel_a_round_under_way() -> None:
    cluster = Cluster(
        ConnectorConfigRecord("src", CONFIG), *_tasks(2), TaskCountRecord("src", 2), *_tasks(2)
    )
    leader = cluster.leader()
    cluster.release.clear()
    round_ = leader.fence_zombies("src", CONFIG)
    for record in _tasks(3):
        cluster.append(record)
    leader.cancel("src")
    cluster.release.set()
    with pytest.raises(ConnectRestException) as info:
        round_.result(5)
    assert info.value.status == 409
    assert str(info.value) == (
        "Failed to complete zombie fencing because a new set of task configs was generated"
    )
    # No record for the cancelled round; the next round fences the 2 tasks of the record.
    assert cluster.history() == ({"src": 2}, frozenset({"src"}))
    leader.fence_zombies("src", CONFIG).result(5)
    assert cluster.fenced[-1] == ("g-src-0", "g-src-1")
    assert cluster.history() == ({"src": 3}, frozenset())


def test_a_newer_generation_read_before_recording_fails_the_round() -> None:
    cluster = Cluster(
        ConnectorConfigRecord("src", CONFIG), *_tasks(2), TaskCountRecord("src", 2), *_tasks(2)
    )
    leader = cluster.leader()
    cluster.release.clear()
    round_ = leader.fence_zombies("src", CONFIG)
    for record in _tasks(1):  # not cancelled: seen only when the leader reads to the end
        cluster.append(record)
    cluster.release.set()
    with pytest.raises(ConnectRestException) as info:
        round_.result(5)
    assert (info.value.status, str(info.value)) == (
        409,
        "Fencing failed because new task configurations were generated for the connector",
    )
    assert cluster.history() == ({"src": 2}, frozenset({"src"}))


def test_a_leader_demoted_during_the_round_writes_no_record() -> None:
    cluster = Cluster(
        ConnectorConfigRecord("src", CONFIG), *_tasks(2), TaskCountRecord("src", 2), *_tasks(3)
    )
    leader = cluster.leader()
    cluster.release.clear()
    round_ = leader.fence_zombies("src", CONFIG)
    cluster.leading = False  # another worker leads by the time the fencing is done
    cluster.release.set()
    with pytest.raises(NotLeaderError):
        round_.result(5)
    # Fenced, but no task-count record: the new leader runs its own round.
    assert cluster.fenced == [("g-src-0", "g-src-1")]
    assert cluster.history() == ({"src": 2}, frozenset({"src"}))


def test_the_configs_a_round_was_started_for_do_not_cancel_it() -> None:
    """The round reads the config topic first; the herder sees the same task configs as
    new afterwards. That must not cancel the round (a task of the newest generation
    would fail with 'a new set of task configs was generated')."""
    cluster = Cluster(
        ConnectorConfigRecord("src", CONFIG), *_tasks(3), TaskCountRecord("src", 3), *_tasks(1)
    )
    leader = cluster.leader()
    cluster.release.clear()
    round_ = leader.fence_zombies("src", CONFIG)
    leader.cancel("src")  # the herder's late event for the configs the round is for
    cluster.release.set()
    round_.result(5)
    assert cluster.history() == ({"src": 1}, frozenset())
