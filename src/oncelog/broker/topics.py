"""Topic registry: names, ids, partition logs and per-topic config overrides.

Topic metadata lives in ``<data-dir>/meta/topics.json``, replaced atomically on
every change; partition data in ``<data-dir>/<topic>-<partition>/`` as Kafka
lays it out. On start, partition directories not named by the metadata (left
by a crash during delete) are removed.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from oncelog.storage.config import ConfigError, LogConfig
from oncelog.storage.fsutil import atomic_write
from oncelog.storage.log import PartitionLog

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
    if not _LEGAL.match(name):
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
    partitions: list[PartitionLog] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    def __init__(
        self, data_dir: Path, topic_defaults: dict[str, str], *, producer_id_expiration_ms: int
    ) -> None:
        self.data_dir = data_dir
        self.meta_path = data_dir / "meta" / "topics.json"
        self.topic_defaults = topic_defaults
        self.default_log_config = LogConfig.from_props(topic_defaults)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}

    # -- persistence -------------------------------------------------------
    def load(self, now_ms: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "meta").mkdir(exist_ok=True)
        if self.meta_path.exists():
            doc = json.loads(self.meta_path.read_text())
            for name, entry in doc["topics"].items():
                topic = Topic(name, uuid.UUID(entry["id"]), dict(entry["configs"]))
                cfg = self.log_config(topic.configs)
                for p in range(entry["partitions"]):
                    topic.partitions.append(self._open_partition(name, p, cfg, now_ms))
                self._index(topic)
        self._remove_orphans()

    def _save(self) -> None:
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
        atomic_write(self.meta_path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def _remove_orphans(self) -> None:
        wanted = {f"{t.name}-{p}" for t in self.topics.values() for p in range(len(t.partitions))}
        for child in self.data_dir.iterdir():
            if child.is_dir() and child.name != "meta" and "-" in child.name:
                if child.name not in wanted and child.name.rpartition("-")[2].isdigit():
                    log.warning("removing orphaned partition directory %s", child)
                    shutil.rmtree(child, ignore_errors=True)

    def _open_partition(self, name: str, index: int, cfg: LogConfig, now_ms: int) -> PartitionLog:
        return PartitionLog.open(
            self.data_dir / f"{name}-{index}",
            cfg,
            now_ms=now_ms,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )

    def _index(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    # -- queries -----------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

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
        now_ms: int,
        validate_only: bool = False,
    ) -> Topic | None:
        problem = topic_name_error(name)
        if problem:
            raise TopicError(ErrorCode.invalid_topic_exception, problem)
        if name in self.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            )
        cfg = self.log_config(configs)
        if validate_only:
            return None
        topic = Topic(name, uuid.uuid4(), dict(configs))
        for p in range(num_partitions):
            topic.partitions.append(self._open_partition(name, p, cfg, now_ms))
        self._index(topic)
        self._save()
        return topic

    def ensure_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], *, now_ms: int
    ) -> list[PartitionLog]:
        """A coordinator's topic, created on first start (its partition logs)."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self.create(name, partitions, dict(configs), now_ms=now_ms)
            assert topic is not None
            log.info("created internal topic %s with %d partitions", name, partitions)
        return topic.partitions

    def delete(self, name: str) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        del self.topics[name]
        del self.by_id[topic.topic_id]
        self._save()  # metadata first: a crash now leaves orphans, removed on start
        for part in topic.partitions:
            part.delete()

    def add_partitions(
        self, name: str, total: int, *, now_ms: int, validate_only: bool = False
    ) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
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
        if validate_only:
            return
        cfg = self.log_config(topic.configs)
        for p in range(current, total):
            topic.partitions.append(self._open_partition(name, p, cfg, now_ms))
        self._save()

    def set_configs(
        self, name: str, configs: dict[str, str], *, validate_only: bool = False
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
        self._save()

    def close(self) -> None:
        for topic in self.topics.values():
            for part in topic.partitions:
                try:
                    part.close()
                except Exception:
                    log.exception("error closing %s", topic.name)
