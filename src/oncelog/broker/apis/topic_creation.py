"""Create or grow a topic with its disk work off the event loop (CreateTopics, Metadata
auto-create, CreatePartitions): logs opened and metadata written in threads.

Opening a partition's log creates a directory and files; thousands of them, or
hundreds of auto-created topics in one Metadata request, would hold the loop for
seconds. The registry plans and commits on the loop; the logs open in a thread.
"""

from __future__ import annotations

import asyncio

from oncelog.broker.topics import Topic, TopicError, TopicRegistry, drop_partitions

# Creating more partitions than this opens their logs in a worker thread: thousands of
# directories and files would otherwise hold the event loop for seconds.
OFF_LOOP_PARTITIONS = 32


async def create_topic(
    registry: TopicRegistry,
    name: str,
    num_partitions: int,
    configs: dict[str, str],
    *,
    validate_only: bool = False,
    save: bool = True,
    off_loop_above: int = 0,
) -> Topic | None:
    """Like ``registry.create``; partitions beyond ``off_loop_above`` open in a thread,
    and the metadata is written in one (``save=False``: the caller saves)."""
    if num_partitions <= off_loop_above:
        topic = registry.create(
            name, num_partitions, configs, validate_only=validate_only, save=False
        )
    else:
        plan = registry.plan_create(name, num_partitions, configs, validate_only=validate_only)
        if plan is None:
            return None
        try:
            partitions = await asyncio.to_thread(registry.open_partitions, plan)
        except BaseException:
            registry.release(plan)
            raise
        plan.topic.partitions.extend(partitions)
        topic = registry.commit_create(plan, save=False)
    if topic is not None and save:
        await registry.save_off_loop()
    return topic


async def add_partitions(
    registry: TopicRegistry,
    name: str,
    total: int,
    *,
    validate_only: bool = False,
    off_loop_above: int = 0,
) -> None:
    """Like ``registry.add_partitions``; more than ``off_loop_above`` new partitions open
    in a thread."""
    plan = registry.plan_add_partitions(name, total, validate_only=validate_only)
    if plan is None:
        return
    try:
        if len(plan.indexes) <= off_loop_above:
            opened = registry.open_partitions(plan)
        else:
            opened = await asyncio.to_thread(registry.open_partitions, plan)
    except BaseException:
        registry.release(plan)
        raise
    try:
        registry.commit_add_partitions(plan, opened, save=False)
    except TopicError:  # deleted meanwhile: the new logs belong to no topic
        await asyncio.to_thread(drop_partitions, opened)
        raise
    await registry.save_off_loop()
