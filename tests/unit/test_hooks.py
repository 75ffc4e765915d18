"""The one test-hook seam: the registry's points (nothing happens unless a hook is
installed; ``installed`` gives the earlier hooks back), the broker's ``oncelog.debug.*``
settings declared once with their Kafka-style keys and turned into hooks, and a hook at
``coordinator.load`` failing a transaction-log partition's load (NOT_COORDINATOR, then
served once the loader's retry loads it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog import hooks
from oncelog.broker.config import BROKER_CONFIG_DEF
from oncelog.broker.debug_settings import DebugSettings
from oncelog.config.typed import build
from oncelog.coordinator import loader as coordinator_loader
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

from .test_txn_background_load import id_on, new_txn, open_topics, write_ids

DEBUG_KEYS = {
    "oncelog.debug.flush.hold.file",
    "oncelog.debug.cleaner.cleaned.delay.ms",
    "oncelog.debug.cleaner.swap.delay.ms",
    "oncelog.debug.marker.delay.ms",
    "oncelog.debug.group.load.partition.delay.ms",
    "oncelog.debug.group.load.fail",
}


def test_points_do_nothing_until_a_hook_is_installed() -> None:
    seen: list[dict[str, object]] = []
    hooks.point("test.point", a=1)
    assert hooks.delay_ms("test.delay") == 0
    with hooks.installed({"test.point": lambda **facts: seen.append(facts)}):
        hooks.point("test.point", a=1)
        with hooks.installed({"test.point": lambda **facts: seen.append({"inner": facts})}):
            hooks.point("test.point", a=2)
        hooks.point("test.point", a=3)  # the outer hook is back
    hooks.point("test.point", a=4)
    assert seen == [{"a": 1}, {"inner": {"a": 2}}, {"a": 3}]


def test_debug_settings_keep_their_keys_and_install_nothing_by_default() -> None:
    assert DEBUG_KEYS <= {key.name for key in BROKER_CONFIG_DEF.keys()}
    assert DebugSettings().hooks() == {}
    debug = build(
        DebugSettings,
        {"oncelog.debug.marker.delay.ms": "250", "oncelog.debug.cleaner.swap.delay.ms": "7"},
    )
    with hooks.installed(debug.hooks()):
        assert hooks.delay_ms("txn.markers") == 250
        assert hooks.delay_ms("cleaner.stage", stage="swap") == 7
        assert hooks.delay_ms("cleaner.stage", stage="cleaned") == 0
    assert hooks.delay_ms("txn.markers") == 0


def test_the_group_load_hook_fails_only_the_named_partitions_first_loads() -> None:
    load = DebugSettings(group_load_fail="1:2").hooks()["coordinator.load"]

    async def attempts() -> list[str]:
        out = []
        for topic, partition in [
            (TRANSACTION_STATE_TOPIC, 1),
            (CONSUMER_OFFSETS_TOPIC, 0),
            *[(CONSUMER_OFFSETS_TOPIC, 1)] * 3,
        ]:
            try:
                await load(topic=topic, partition=partition)  # type: ignore[misc]
                out.append("ok")
            except OSError as exc:
                out.append(str(exc))
        return out

    failed = "oncelog.debug.group.load.fail: __consumer_offsets-1"
    assert asyncio.run(attempts()) == ["ok", "ok", failed, failed, "ok"]


def test_a_failed_transaction_log_load_answers_not_coordinator_until_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = write_ids(tmp_path, {1: 3})
    txn_id = id_on(1)
    monkeypatch.setattr(coordinator_loader, "LOAD_RETRY_MIN_S", 0.3)
    topics = open_topics(tmp_path)
    failures = [0]

    def fail_once(*, topic: str, partition: int) -> None:
        if topic == TRANSACTION_STATE_TOPIC and partition == 1 and not failures[0]:
            failures[0] += 1
            raise OSError("injected")

    async def scenario() -> None:
        txn = new_txn(tmp_path, topics, load_wait_ms=0)
        with hooks.installed({"coordinator.load": fail_once}):
            txn.start(background=True)
            try:
                while 1 not in txn.runtime.loader._failed:
                    await asyncio.sleep(0)
                reply = await txn.init_producer_id(txn_id, 60_000)
                assert reply.error is ErrorCode.not_coordinator
                while not txn.loaded:  # the retry, after the back-off
                    await asyncio.sleep(0.01)
                assert failures == [1]
                reply = await txn.init_producer_id(txn_id, 60_000)
                assert (reply.error, reply.producer_id) == (ErrorCode.none, written[txn_id][0])
            finally:
                await txn.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()
