"""TopicRegistry: internal topics keep their partition count and refuse client changes;
topic creation takes its time from the injected clock."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.broker.topics import TopicError, TopicRegistry, drop_partitions
from oncelog.coordinator.internal_topics import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    internal_topic_config,
)

from .test_storage_support import append

NOW = 1_700_000_000_000


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[TopicRegistry]:
    reg = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW)
    reg.load()
    yield reg
    reg.close()


def test_internal_topic_keeps_its_partition_count_and_configs(
    registry: TopicRegistry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parts = registry.ensure_internal_topic(TRANSACTION_STATE_TOPIC, 4, internal_topic_config(65536))
    assert len(parts) == 4 and registry.partition_count(TRANSACTION_STATE_TOPIC) == 4
    assert parts[0].config.segment_bytes == 65536 and parts[0].config.cleanup_policy == ("compact",)
    assert parts[0].segments[0].rolling_base_ms == NOW  # the injected clock
    registry.close()
    again = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW)
    again.load()
    try:
        with caplog.at_level(logging.WARNING):
            parts = again.ensure_internal_topic(
                TRANSACTION_STATE_TOPIC, 9, internal_topic_config(1 << 20)
            )
        assert len(parts) == 4 and parts[0].config.segment_bytes == 65536
        assert "has 4 partitions; the configured 9 is ignored" in caplog.text
    finally:
        again.close()


def test_client_changes_to_internal_topics_are_refused(registry: TopicRegistry) -> None:
    registry.ensure_internal_topic(CONSUMER_OFFSETS_TOPIC, 2, internal_topic_config(65536))
    for change in (
        lambda: registry.delete(CONSUMER_OFFSETS_TOPIC),
        lambda: registry.add_partitions(CONSUMER_OFFSETS_TOPIC, 3),
        lambda: registry.delete_records(CONSUMER_OFFSETS_TOPIC, 0, -1),
    ):
        with pytest.raises(TopicError) as refused:
            change()
        assert refused.value.code == ErrorCode.invalid_topic_exception
    assert registry.partition_count(CONSUMER_OFFSETS_TOPIC) == 2
    registry.create("plain", 1, {})
    assert registry.delete_records("plain", 0, -1) == 0
    with pytest.raises(TopicError) as beyond:
        registry.delete_records("plain", 0, 5)
    assert beyond.value.code == ErrorCode.offset_out_of_range
    with pytest.raises(TopicError) as missing:
        registry.delete_records("plain", 1, 0)
    assert missing.value.code == ErrorCode.unknown_topic_or_partition


def test_load_removes_only_orphaned_partition_directories(tmp_path: Path) -> None:
    reg = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW)
    reg.load()
    reg.create("my-topic", 2, {})
    reg.close()
    for name in ("my-topic-2", "gone-0", "notes", "backup-old"):
        (tmp_path / name).mkdir()
    (tmp_path / "gone-1").write_text("a file, not a partition directory")
    again = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW)
    again.load()
    try:
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == ["backup-old", "gone-1", "meta", "my-topic-0", "my-topic-1", "notes"]
        assert again.partition_count("my-topic") == 2
    finally:
        again.close()


def test_the_broker_wide_partition_limit_refuses_creates_and_growth(tmp_path: Path) -> None:
    reg = TopicRegistry(
        tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW, max_partitions=10
    )
    reg.load()
    reg.create("a", 6, {})
    with pytest.raises(TopicError) as too_many:
        reg.create("b", 5, {})
    assert too_many.value.code == ErrorCode.policy_violation
    assert reg.get("b") is None and not (tmp_path / "b-0").exists()
    with pytest.raises(TopicError) as grown:
        reg.add_partitions("a", 11)
    assert grown.value.code == ErrorCode.policy_violation
    plan = reg.plan_create("c", 3, {})  # a create in progress holds its share
    assert plan is not None
    with pytest.raises(TopicError):
        reg.create("d", 2, {})
    reg.release(plan)  # released: the room is back
    reg.create("d", 4, {})
    assert reg.partition_count("d") == 4
    reg.close()


def test_growing_a_topic_in_steps_reserves_room_and_survives_a_delete(tmp_path: Path) -> None:
    """plan (on the loop) / open (a thread) / commit (on the loop): the new partitions are
    invisible until committed, a second growth meanwhile is refused, and a delete
    meanwhile makes the commit answer UNKNOWN_TOPIC_OR_PARTITION."""
    reg = TopicRegistry(
        tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW, max_partitions=10
    )
    reg.load()
    try:
        reg.create("a", 2, {})
        plan = reg.plan_add_partitions("a", 5)
        assert plan is not None and plan.indexes == range(2, 5)
        with pytest.raises(TopicError) as again:
            reg.plan_add_partitions("a", 6)
        assert again.value.code == ErrorCode.invalid_partitions
        with pytest.raises(TopicError) as room:  # 2 + 3 planned + 6 > 10
            reg.create("b", 6, {})
        assert room.value.code == ErrorCode.policy_violation
        opened = reg.open_partitions(plan)
        assert reg.partition_count("a") == 2  # not visible before the commit
        reg.commit_add_partitions(plan, opened)
        assert reg.partition_count("a") == 5 and reg.partition("a", 4) is opened[-1]

        plan = reg.plan_add_partitions("a", 7)
        assert plan is not None
        opened = reg.open_partitions(plan)
        reg.delete("a")
        with pytest.raises(TopicError) as gone:
            reg.commit_add_partitions(plan, opened)
        assert gone.value.code == ErrorCode.unknown_topic_or_partition
        assert reg.get("a") is None
        drop_partitions(opened)  # what the CreatePartitions handler does with them
        assert not list(tmp_path.glob("a-*"))
        reg.create("c", 10, {})  # the reservation was released: all 10 fit
    finally:
        reg.close()


def test_a_name_is_free_again_only_once_the_deleted_topics_files_are_gone(
    registry: TopicRegistry, tmp_path: Path
) -> None:
    """DeleteTopics detaches on the loop and removes the files in a thread. Creating the
    same name meanwhile (the protocol fuzzer did, through Metadata auto-creation) would
    open the directories being removed: it gets Kafka's TOPIC_ALREADY_EXISTS "marked for
    deletion" until the files are gone, then a fresh, empty topic."""
    registry.create("t", 1, {})
    append(registry.partition("t", 0), 3)
    detached = registry.detach("t")
    with pytest.raises(TopicError) as marked:
        registry.create("t", 1, {})
    assert (marked.value.code, marked.value.message) == (
        ErrorCode.topic_already_exists,
        "Topic 't' is marked for deletion.",
    )
    drop_partitions(detached)
    registry.dropped("t")
    registry.create("t", 1, {})
    assert registry.partition("t", 0).log_end_offset == 0


def test_metadata_written_off_the_loop_is_never_older_than_what_is_on_disk(
    registry: TopicRegistry, tmp_path: Path
) -> None:
    """Writes run in threads, so an older snapshot may reach the disk after a newer one:
    it is skipped, and the file always holds the newest registry written."""
    registry.create("a", 1, {}, save=False)
    older = registry._snapshot()
    registry.create("b", 1, {}, save=False)
    newer = registry._snapshot()
    registry._write(*newer)
    registry._write(*older)  # late: skipped
    assert set(json.loads(registry.meta_path.read_text())["topics"]) == {"a", "b"}

    async def concurrent_saves() -> None:
        registry.create("c", 1, {}, save=False)
        first = asyncio.ensure_future(registry.save_off_loop())
        registry.create("d", 1, {}, save=False)
        await asyncio.gather(first, registry.save_off_loop())

    asyncio.run(concurrent_saves())
    assert set(json.loads(registry.meta_path.read_text())["topics"]) == {"a", "b", "c", "d"}
    registry.close()
    again = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000, clock=lambda: NOW)
    again.load()
    try:
        assert sorted(again.topics) == ["a", "b", "c", "d"]
    finally:
        again.close()
