"""Topic registry: names, ids, partition logs and per-topic config overrides.

Topic metadata lives in ``<data-dir>/meta/topics.json``, replaced atomically on
every change; partition data in ``<data-dir>/<topic>-<partition>/`` as Kafka
lays it out. On start, partition directories not named by the metadata (left
by a crash during delete) are removed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog.clock import Clock, now_ms
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from oncelog.storage.checkpoint import CleanShutdown, take_clean_shutdowns
from oncelog.storage.config import ConfigError, LogConfig
from oncelog.storage.errors import OffsetOutOfRangeError
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.log_batch import close_logs, open_logs
from oncelog.storage.partition_dir import partition_dir, partition_dir_names
from oncelog.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def topic_name_error(name: str | None) -> str | None:
    """Kafka's Topic.validate rules; returns a message or None if legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.fullmatch(name):  # "$" alone also matches before a final newline
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]  # overrides only; defaults come from the broker
    partitions: list[UnifiedLog] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(slots=True)
class TopicCreation:
    """A planned topic whose partition logs are not open yet (see ``plan_create``)."""

    topic: Topic
    indexes: range
    config: LogConfig
    now: int


def drop_partitions(partitions: list[UnifiedLog]) -> None:
    """Delete detached partitions' files (disk work, safe off the loop)."""
    for part in partitions:
        part.delete()


class TopicRegistry:
    def __init__(
        self,
        data_dir: Path,
        topic_defaults: dict[str, str],
        *,
        producer_id_expiration_ms: int,
        clock: Clock = now_ms,
        max_partitions: int = 4_000,
    ) -> None:
        self.data_dir = data_dir
        self._clock = clock
        self.meta_path = data_dir / "meta" / "topics.json"
        # Log ends and producer states of the last clean shutdown (see close_logs).
        self.clean_shutdown_path = data_dir / "meta" / "clean-shutdown.json"
        self._clean: dict[str, CleanShutdown] = {}  # consumed by the first load
        self.topic_defaults = topic_defaults
        self.default_log_config = LogConfig.from_props(topic_defaults)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._creating: set[str] = set()  # names whose partitions are being opened
        # Names of deleted topics whose files are still being removed: a new topic of the
        # same name would open the directories being removed (and could see old segments).
        self._deleting: set[str] = set()
        # Every partition holds open files: a request for millions would exhaust the
        # process's descriptors (the fuzzer did), so the broker caps its total.
        self.max_partitions = max_partitions
        self._planned = 0  # partitions of creates in progress
        # Metadata snapshots are numbered; a write older than one already on disk is
        # skipped (writes run in threads: see ``save_off_loop``).
        self._snapshots = 0
        self._written = 0
        self._write_lock = threading.Lock()

    # -- persistence -------------------------------------------------------
    def load(self) -> None:
        now = self._clock()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "meta").mkdir(exist_ok=True)
        self._clean = take_clean_shutdowns(self.clean_shutdown_path)
        if self.meta_path.exists():
            doc = json.loads(self.meta_path.read_text())
            # Every topic's partitions in one batch: one filesystem sync for all of them.
            topics: list[Topic] = []
            opens: list[Callable[[bool], UnifiedLog]] = []
            for name, entry in doc["topics"].items():
                topic = Topic(name, uuid.UUID(entry["id"]), dict(entry["configs"]))
                cfg = self.log_config(topic.configs)
                topics.append(topic)
                opens.extend(self._opener(name, i, cfg, now) for i in range(entry["partitions"]))
            opened = iter(open_logs(self.data_dir, opens))
            for topic, entry in zip(topics, doc["topics"].values(), strict=True):
                topic.partitions.extend(next(opened) for _ in range(entry["partitions"]))
                self._index(topic)
        self._clean = {}
        self._remove_orphans()

    def _save(self) -> None:
        self._write(*self._snapshot())

    async def save_off_loop(self) -> None:
        """Write the metadata with its fsyncs in a thread: on a busy disk they take up
        to seconds, and on the loop every client would wait. Returns once the registry
        as it is now (or newer) is durable."""
        await asyncio.to_thread(self._write, *self._snapshot())

    def _write(self, snapshot: int, data: bytes) -> None:
        with self._write_lock:
            if snapshot <= self._written:
                return  # a newer snapshot, which holds this one's changes, is on disk
            atomic_write(self.meta_path, data)
            self._written = snapshot

    def _snapshot(self) -> tuple[int, bytes]:
        """The metadata as it is now (taken on the loop), numbered."""
        self._snapshots += 1
        doc = {
            "version": 1,
            "topics": {
                t.name: {
                    "id": str(t.topic_id),
                    "partitions": len(t.partitions),
                    "configs": t.configs,
                }
                for t in self.topics.values()
            },
        }
        return self._snapshots, json.dumps(doc, indent=1, sort_keys=True).encode()

    def _remove_orphans(self) -> None:
        wanted = {(t.name, p) for t in self.topics.values() for p in range(len(t.partitions))}
        for topic, partition, name in partition_dir_names(self.data_dir):
            if (topic, partition) not in wanted:
                path = self.data_dir / name
                log.warning("removing orphaned partition directory %s", path)
                shutil.rmtree(path, ignore_errors=True)

    def _open_partitions(
        self, name: str, indexes: range, cfg: LogConfig, now: int
    ) -> list[UnifiedLog]:
        """Open (create or recover) partitions (``open_logs`` decides how to sync)."""
        return open_logs(self.data_dir, [self._opener(name, i, cfg, now) for i in indexes])

    def _opener(
        self, name: str, index: int, cfg: LogConfig, now: int
    ) -> Callable[[bool], UnifiedLog]:
        directory = partition_dir(self.data_dir, name, index)
        return lambda sync: UnifiedLog.open(
            directory,
            cfg,
            now_ms=now,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            sync=sync,
            clean=self._clean.get(directory.name),
        )

    def _index(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    # -- queries -----------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> UnifiedLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return None if topic is None else len(topic.partitions)

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        try:
            return LogConfig.from_props({**self.topic_defaults, **overrides})
        except ConfigError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from exc

    # -- changes -----------------------------------------------------------
    def create(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str],
        *,
        validate_only: bool = False,
        save: bool = True,
    ) -> Topic | None:
        """``save=False`` leaves writing the metadata to the caller (``save()``), so a
        request auto-creating hundreds of topics rewrites it once, not once per topic."""
        plan = self.plan_create(name, num_partitions, configs, validate_only=validate_only)
        if plan is None:
            return None
        try:
            plan.topic.partitions.extend(self.open_partitions(plan))
        except BaseException:
            self.release(plan)
            raise
        return self.commit_create(plan, save=save)

    # A create in three steps, so the disk work of thousands of partitions can run off
    # the event loop: ``plan_create`` validates and reserves the name (on the loop),
    # ``open_partitions`` creates the directories and files (any thread), and
    # ``commit_create`` makes the topic visible (on the loop); ``release``
    # releases the name if opening failed.
    def plan_create(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str],
        *,
        validate_only: bool = False,
    ) -> TopicCreation | None:
        problem = topic_name_error(name)
        if problem:
            raise TopicError(ErrorCode.invalid_topic_exception, problem)
        if name in self.topics or name in self._creating:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if name in self._deleting:  # Kafka's answer while a deletion is under way
            raise TopicError(
                ErrorCode.topic_already_exists, f"Topic '{name}' is marked for deletion."
            )
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            )
        self._check_room(num_partitions)
        cfg = self.log_config(configs)
        if validate_only:
            return None
        return self._reserve(
            TopicCreation(
                Topic(name, uuid.uuid4(), dict(configs)), range(num_partitions), cfg, self._clock()
            )
        )

    def open_partitions(self, plan: TopicCreation) -> list[UnifiedLog]:
        """Create and open the planned partitions' logs: disk work, safe off the loop."""
        return self._open_partitions(plan.topic.name, plan.indexes, plan.config, plan.now)

    def _check_room(self, more: int) -> None:
        total = sum(len(t.partitions) for t in self.topics.values()) + self._planned
        if total + more > self.max_partitions:
            raise TopicError(
                ErrorCode.policy_violation,
                f"{more} more partitions would exceed the broker's limit of "
                f"{self.max_partitions} (oncelog.max.partitions); it has {total}",
            )

    def _reserve(self, plan: TopicCreation) -> TopicCreation:
        """Hold the name and the room for a plan until ``release``."""
        self._creating.add(plan.topic.name)
        self._planned += len(plan.indexes)
        return plan

    def release(self, plan: TopicCreation) -> None:
        """Give back a plan's reservation (committed or abandoned, a creation or a growth)."""
        self._creating.discard(plan.topic.name)
        self._planned -= len(plan.indexes)

    def commit_create(self, plan: TopicCreation, *, save: bool = True) -> Topic:
        self.release(plan)
        self._index(plan.topic)
        if save:
            self._save()
        return plan.topic

    def save(self) -> None:
        """Write the topic metadata (after creates with ``save=False``)."""
        self._save()

    def detach(self, name: str, *, save: bool = True) -> list[UnifiedLog]:
        """Topic deletion on the loop: the topic is gone from the registry and its
        metadata; the caller drops the returned logs (disk work, safe off the loop), then
        calls ``dropped`` (on the loop) to free the name."""
        topic = self._existing(name)
        _refuse_internal(topic, "delete")
        del self.topics[name]
        del self.by_id[topic.topic_id]
        self._deleting.add(name)
        if save:  # else the caller saves before dropping the logs
            self._save()  # metadata first: a crash now leaves orphans, removed on start
        return topic.partitions

    def dropped(self, name: str) -> None:
        """The files of the deleted topic ``name`` are gone: the name may be created again."""
        self._deleting.discard(name)

    def ensure_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> list[UnifiedLog]:
        """A coordinator's topic, created on first start (its partition logs).

        Like Kafka, an existing topic keeps its partition count and configs: a key's
        partition is ``hash % count``, so a different count would move transactional ids
        and groups away from their state (and break zombie fencing)."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self.create(name, partitions, dict(configs))
            assert topic is not None
            log.info("created internal topic %s with %d partitions", name, partitions)
        elif len(topic.partitions) != partitions:
            log.warning(
                "internal topic %s has %d partitions; the configured %d is ignored "
                "(the partition count of an existing internal topic never changes)",
                name,
                len(topic.partitions),
                partitions,
            )
        return topic.partitions

    def delete(self, name: str) -> None:
        try:
            drop_partitions(self.detach(name))
        finally:
            self.dropped(name)

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        plan = self.plan_add_partitions(name, total, validate_only=validate_only)
        if plan is None:
            return
        try:
            opened = self.open_partitions(plan)
        except BaseException:
            self.release(plan)
            raise
        self.commit_add_partitions(plan, opened)  # on the loop: the topic is still there

    # Growing a topic in three steps, as creating one: ``plan_add_partitions`` validates
    # and reserves (on the loop), ``open_partitions`` opens the new logs (any thread),
    # ``commit_add_partitions`` makes them visible (on the loop).
    def plan_add_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> TopicCreation | None:
        topic = self._existing(name)
        _refuse_internal(topic, "add partitions to")
        if name in self._creating:  # another request is growing it (Kafka serialises them)
            raise TopicError(
                ErrorCode.invalid_partitions, f"Partitions are being added to topic '{name}'."
            )
        current = len(topic.partitions)
        if total < current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than the requested {total}.",
            )
        if total == current:
            raise TopicError(
                ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
            )
        self._check_room(total - current)
        cfg = self.log_config(topic.configs)
        if validate_only:
            return None
        return self._reserve(TopicCreation(topic, range(current, total), cfg, self._clock()))

    def commit_add_partitions(
        self, plan: TopicCreation, opened: list[UnifiedLog], *, save: bool = True
    ) -> None:
        """Append the opened logs. If the topic was deleted while they opened, raises
        UNKNOWN_TOPIC_OR_PARTITION and the caller drops them (``drop_partitions``)."""
        self.release(plan)
        topic = plan.topic
        if self.topics.get(topic.name) is not topic:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                f"Topic '{topic.name}' was deleted while its partitions were added.",
            )
        topic.partitions.extend(opened)
        if save:
            self._save()

    def delete_records(self, name: str, index: int, offset: int) -> int:
        """DeleteRecords: raise the log start of one partition to ``offset`` (-1: the high
        watermark); returns the new low watermark. Refused on internal topics, as Kafka's
        ReplicaManager does: it would drop committed offsets and transaction state."""
        topic = self._existing(name)
        if not 0 <= index < len(topic.partitions):
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        _refuse_internal(topic, "delete records of")
        part = topic.partitions[index]
        target = part.high_watermark if offset == -1 else offset
        if target < 0 or target > part.high_watermark:
            raise TopicError(
                ErrorCode.offset_out_of_range,
                f"cannot delete records before {offset}: high watermark is {part.high_watermark}",
            )
        try:
            return part.delete_records_before(target)
        except OffsetOutOfRangeError as exc:
            raise TopicError(ErrorCode.offset_out_of_range, str(exc)) from exc

    def _existing(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        return topic

    def set_configs(
        self, name: str, configs: dict[str, str], *, validate_only: bool = False, save: bool = True
    ) -> None:
        """Replace a topic's overrides (AlterConfigs semantics)."""
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        cfg = self.log_config(configs)
        if validate_only:
            return
        topic.configs = dict(configs)
        for part in topic.partitions:
            part.update_config(cfg)
        if save:
            self._save()

    def set_topic_defaults(self, topic_defaults: dict[str, str]) -> None:
        """New broker-level topic defaults (a dynamic broker config changed): every
        partition's config is rebuilt from them and its topic's own overrides, as Kafka's
        DynamicLogConfig.updateLogsConfig does, so topics without an override follow."""
        self.topic_defaults = topic_defaults
        self.default_log_config = LogConfig.from_props(topic_defaults)
        for topic in self.topics.values():
            cfg = self.log_config(topic.configs)
            for part in topic.partitions:
                part.update_config(cfg)

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """Kafka's DynamicProducerStateManagerConfig: open logs and those opened later."""
        self.producer_id_expiration_ms = expiration_ms
        for topic in self.topics.values():
            for part in topic.partitions:
                part.producer_state.producer_id_expiration_ms = expiration_ms

    def close(self) -> None:
        logs = [part for topic in self.topics.values() for part in topic.partitions]
        for directory, exc in close_logs(logs, self.data_dir, self.clean_shutdown_path):
            log.error("error closing %s", directory, exc_info=exc)


def _refuse_internal(topic: Topic, what: str) -> None:
    """Clients may not change the coordinators' topics (Kafka: InvalidTopicException)."""
    if topic.internal:
        raise TopicError(
            ErrorCode.invalid_topic_exception, f"Cannot {what} internal topic {topic.name}"
        )
