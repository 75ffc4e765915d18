"""Option parsing for the ``oncelog`` Spark data source (pure: no Spark, no sockets).

Option names mirror Spark's built-in Kafka source and sink
(https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html) so users
already know them. Spark hands options over lower-cased (``CaseInsensitiveDict``); every
parser here lower-cases keys itself, so plain dicts work too. Every error names the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from oncelog.client.config import ClientConfig
from oncelog.client.java_config import librdkafka_settings
from oncelog.client.security import ClientConfigError
from oncelog.config.config_def import ConfigDef
from oncelog.spark.option_defs import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    DEFAULT_POLL_TIMEOUT_MS,
    DEFAULT_TXN_PREFIX,
    DEFAULT_TXN_TIMEOUT_MS,
    READ_OPTIONS_DEF,
    WRITE_OPTIONS_DEF,
)

EARLIEST, LATEST = -2, -1

#: The offsets an option asks for: "earliest", "latest", or {topic: {partition: offset}}
#: where offset -2 means earliest and -1 latest.
OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[int, int]]
#: exactlyOnce.twoPhaseCommit
TwoPhaseMode = Literal["auto", "true", "false"]


class OncelogOptionError(ValueError):
    """A bad or conflicting data source option; the message names the option."""


def _names(definition: ConfigDef) -> frozenset[str]:
    """The options a definition declares, as Spark hands them over (lower case), but the
    kafka.* ones (client settings, checked apart) and with the bootstrap alias."""
    names = {k.lower() for k in definition.names() if not k.startswith("kafka.")}
    return frozenset(names | {"bootstrap.servers"})


# Options Spark itself adds to a sink's or source's option map.
_SPARK_INJECTED = frozenset({"checkpointlocation", "path", "queryname"})
_READ_OPTIONS = _names(READ_OPTIONS_DEF)
_WRITE_OPTIONS = _names(WRITE_OPTIONS_DEF)
# Spark Kafka options we know but do not implement: a clear error beats silently ignoring them.
_UNSUPPORTED = {
    "fetchoffset.numretries": "fetchOffset.numRetries",
    "fetchoffset.retryintervalms": "fetchOffset.retryIntervalMs",
}
# Display names (the case users write) for error messages.
_DISPLAY = {
    name.lower(): name
    for definition in (READ_OPTIONS_DEF, WRITE_OPTIONS_DEF)
    for name in definition.names()
    if name.lower() != name
}

# Java client names users paste from Spark's guide that librdkafka does not know (or knows
# under another name): mapped when the meaning is the same, refused otherwise.
_JAVA_RENAMED = {
    "kafka.fetch.max.wait.ms": "kafka.fetch.wait.max.ms",
    "kafka.buffer.memory": None,  # bytes in Java, KB in librdkafka: refused below
}
_JAVA_REFUSED = {
    "kafka.partitioner.class": (
        "Java partitioner classes do not exist in librdkafka; the sink uses Java's murmur2 "
        "partitioner already (librdkafka 'murmur2_random'); set 'kafka.partitioner' "
        "(e.g. consistent_random, murmur2_random, fnv1a_random) to choose another"
    ),
    "kafka.max.poll.records": (
        "the source reads whole offset ranges, not polls; bound a micro-batch with "
        "'maxOffsetsPerTrigger' and a Spark partition with 'maxRecordsPerPartition'"
    ),
    "kafka.buffer.memory": "use 'kafka.queue.buffering.max.kbytes' (librdkafka, in KB)",
    "kafka.interceptor.classes": "Java interceptors cannot run in librdkafka",
    "kafka.metric.reporters": "Java metric reporters cannot run in librdkafka",
}
# kafka.* client settings the data source owns: the user sets them through source options.
_READ_OWNED = {
    "kafka.auto.offset.reset": "use the option 'startingOffsets'",
    "kafka.enable.auto.commit": "the source never commits consumer offsets (Spark checkpoints them)",
    "kafka.enable.partition.eof": "the reader needs partition EOF events to finish a range",
    "kafka.key.deserializer": "keys are always returned as binary",
    "kafka.value.deserializer": "values are always returned as binary",
}
_WRITE_OWNED = {
    "kafka.transactional.id": "use the option 'transactionalIdPrefix'",
    "kafka.transaction.timeout.ms": "use the option 'transactionTimeoutMs'",
    "kafka.key.serializer": "keys are written as binary/string",
    "kafka.value.serializer": "values are written as binary/string",
}

__all__ = [
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "DEFAULT_POLL_TIMEOUT_MS",
    "DEFAULT_TXN_PREFIX",
    "DEFAULT_TXN_TIMEOUT_MS",
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "OncelogOptionError",
    "ReadOptions",
    "Subscription",
    "TimestampSpec",
    "TwoPhaseMode",
    "WriteOptions",
    "client_conf",
    "display",
    "parse_offset_spec",
    "parse_read_options",
    "parse_write_options",
]

_DURATION_RE = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*$", re.I)
_DURATION_UNITS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_TXN_PREFIX_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def _default(definition: ConfigDef, key: str) -> Any:
    """The declared default of option ``key`` (lower case, as Spark hands it over)."""
    return next(k.default for k in definition.keys() if k.name.lower() == key)


def display(key: str) -> str:
    return _DISPLAY.get(key, key)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OncelogOptionError(f"option '{display(key)}' must be true or false, got {raw!r}")


def _positive_int(opts: dict[str, str], key: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OncelogOptionError(
            f"option '{display(key)}' must be a positive integer, got {raw!r}"
        ) from None
    if value <= 0:
        raise OncelogOptionError(f"option '{display(key)}' must be a positive integer, got {raw!r}")
    return value


def _bootstrap(opts: dict[str, str]) -> str:
    a, b = opts.get("kafka.bootstrap.servers"), opts.get("bootstrap.servers")
    if a and b and a != b:
        raise OncelogOptionError(
            "options 'kafka.bootstrap.servers' and 'bootstrap.servers' conflict; set only one"
        )
    servers = (a or b or "").strip()
    if not servers:
        raise OncelogOptionError(
            "option 'kafka.bootstrap.servers' is required (host:port[,host:port...])"
        )
    for server in servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OncelogOptionError(
                f"option 'kafka.bootstrap.servers': expected host:port, got {server.strip()!r}"
            )
    return servers


def _check_keys(
    opts: dict[str, str], allowed: frozenset[str], other: frozenset[str], role: str, other_role: str
) -> None:
    for key in opts:
        if key in allowed or key in _SPARK_INJECTED or key.startswith("kafka."):
            continue
        if key in _UNSUPPORTED:
            raise OncelogOptionError(
                f"option '{_UNSUPPORTED[key]}' is not supported by the oncelog data source"
            )
        if key in other:
            raise OncelogOptionError(
                f"option '{display(key)}' applies to {other_role}, not to {role}"
            )
        known = ", ".join(sorted(display(k) for k in allowed))
        raise OncelogOptionError(
            f"unknown option '{key}' for {role}; known options: {known}, kafka.*"
        )


def client_conf(opts: dict[str, str], owned: Mapping[str, str]) -> dict[str, str]:
    """kafka.* options with the prefix removed, for the librdkafka client; Kafka's
    security names (kafka.sasl.jaas.config, PEM kafka.ssl.truststore.location, ...) are
    translated as the Java client's would be read (``oncelog.client.java_config``)."""
    out: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        if key in owned:
            raise OncelogOptionError(f"option '{key}' is not allowed: {owned[key]}")
        if key in _JAVA_REFUSED:
            raise OncelogOptionError(
                f"option '{key}' (a Java client setting): {_JAVA_REFUSED[key]}"
            )
        key = _JAVA_RENAMED.get(key) or key
        out[key[len("kafka.") :]] = value
    try:
        return librdkafka_settings(out)
    except ClientConfigError as exc:
        raise OncelogOptionError(f"kafka.* security options: kafka.{exc}") from None


def _check_security(bootstrap: str, conf: dict[str, str]) -> None:
    """kafka.security.protocol, kafka.ssl.*, kafka.sasl.*: rejected at once when invalid."""
    try:
        ClientConfig.of(bootstrap, conf)
    except ClientConfigError as exc:
        raise OncelogOptionError(f"kafka.* security options: {exc}") from None


def parse_offset_spec(raw: str, key: str) -> OffsetSpec:
    """'earliest', 'latest' or JSON {"topic": {"0": 23, "1": -2}} (-2 earliest, -1 latest)."""
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OncelogOptionError(
            f"option '{display(key)}' must be 'earliest', 'latest' or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}; cannot parse {raw!r}: {exc.msg}'
        ) from None
    if not isinstance(data, dict) or not data:
        raise OncelogOptionError(
            f"option '{display(key)}': expected a JSON object of topics, got {raw!r}"
        )
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OncelogOptionError(
                f"option '{display(key)}': topic {topic!r} must map partitions to offsets, got {parts!r}"
            )
        out[topic] = {}
        for p, off in parts.items():
            if not isinstance(p, str) or not p.isdigit():
                raise OncelogOptionError(
                    f"option '{display(key)}': partition {p!r} of topic {topic!r} is not a non-negative integer"
                )
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise OncelogOptionError(
                    f"option '{display(key)}': offset {off!r} of {topic}-{p} must be an integer >= 0, or -2 (earliest) / -1 (latest)"
                )
            out[topic][int(p)] = off
    return out


@dataclass(frozen=True)
class TimestampSpec:
    """Offsets by record timestamp (ListOffsets by timestamp): the first offset whose
    timestamp is >= the given one. ``everywhere`` (startingTimestamp / endingTimestamp)
    applies to every partition; otherwise ``per_partition`` must name every partition."""

    everywhere: int | None = None
    per_partition: dict[str, dict[int, int]] | None = None

    def timestamp(self, topic: str, partition: int) -> int | None:
        if self.everywhere is not None:
            return self.everywhere
        return (self.per_partition or {}).get(topic, {}).get(partition)


def _timestamp(opts: dict[str, str], key: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OncelogOptionError(
            f"option '{display(key)}' must be a timestamp in milliseconds since the epoch, got {raw!r}"
        )
    return value


def _timestamp_json(opts: dict[str, str], key: str) -> dict[str, dict[int, int]] | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OncelogOptionError(
            f'option \'{display(key)}\' must be JSON like {{"topic":{{"0":1700000000000}}}}; '
            f"cannot parse {raw!r}: {exc.msg}"
        ) from None
    out: dict[str, dict[int, int]] = {}
    if not isinstance(data, dict) or not data:
        raise OncelogOptionError(
            f"option '{display(key)}': expected a JSON object of topics, got {raw!r}"
        )
    for topic, parts in data.items():
        if not isinstance(parts, dict) or not parts:
            raise OncelogOptionError(
                f"option '{display(key)}': topic {topic!r} must map partitions to timestamps, got {parts!r}"
            )
        for p, ts in parts.items():
            if not str(p).isdigit() or isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise OncelogOptionError(
                    f"option '{display(key)}': {topic}-{p}: expected a partition number and a "
                    f"timestamp in ms >= 0, got {p!r}: {ts!r}"
                )
            out.setdefault(topic, {})[int(p)] = ts
    return out


def _timestamp_spec(opts: dict[str, str], everywhere: str, per: str) -> TimestampSpec | None:
    """Spark's precedence: the global timestamp, then the per-partition JSON."""
    ts = _timestamp(opts, everywhere)
    table = _timestamp_json(opts, per)
    if ts is not None:
        return TimestampSpec(everywhere=ts)
    if table is not None:
        return TimestampSpec(per_partition=table)
    return None


def _duration_ms(opts: dict[str, str], key: str, default: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    m = _DURATION_RE.match(raw)
    if not m:
        raise OncelogOptionError(
            f"option '{display(key)}' must be a duration like 500ms, 30s, 15m, 1h; got {raw!r}"
        )
    return int(m.group(1)) * _DURATION_UNITS[(m.group(2) or "ms").lower()]


@dataclass(frozen=True)
class Subscription:
    """Exactly one of subscribe / subscribePattern / assign."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern!r}"
        if self.assign is not None:
            return f"assign={self.assign!r}"
        return f"subscribe={','.join(self.topics)!r}"

    def select(self, cluster: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The topic-partitions to read, given {topic: partition count} from Metadata."""
        if self.assign is not None:
            return {t: ps for t, ps in self.assign.items()}
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            return {
                t: tuple(range(n))
                for t, n in sorted(cluster.items())
                if not t.startswith("__") and rx.fullmatch(t)
            }
        return {t: tuple(range(cluster[t])) for t in self.topics if t in cluster}


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(given) != 1:
        what = "none was given" if not given else "got " + ", ".join(display(k) for k in given)
        raise OncelogOptionError(
            f"exactly one of the options 'subscribe', 'subscribePattern', 'assign' is required; {what}"
        )
    key = given[0]
    raw = opts[key].strip()
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OncelogOptionError(f"option 'subscribe' names no topic: {raw!r}")
        return Subscription(topics=tuple(dict.fromkeys(topics)))
    if key == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OncelogOptionError(
                f"option 'subscribePattern' is not a valid regular expression: {exc}"
            ) from None
        return Subscription(pattern=raw)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OncelogOptionError(
            f"option 'assign' must be JSON like {{\"topic\":[0,1]}}; cannot parse {raw!r}: {exc.msg}"
        ) from None
    if not isinstance(data, dict) or not data:
        raise OncelogOptionError(
            f"option 'assign' must be a JSON object like {{\"topic\":[0,1]}}, got {raw!r}"
        )
    assign: dict[str, tuple[int, ...]] = {}
    for topic, parts in data.items():
        if (
            not isinstance(parts, list)
            or not parts
            or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        ):
            raise OncelogOptionError(
                f"option 'assign': topic {topic!r} needs a non-empty list of partition numbers, got {parts!r}"
            )
        assign[topic] = tuple(sorted(set(parts)))
    return Subscription(assign=assign)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec = "latest"
    ending: OffsetSpec | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_committed"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    consumer_conf: dict[str, str] = field(default_factory=dict)
    # Timestamps take precedence over starting / ending (Spark's order).
    starting_by_timestamp: TimestampSpec | None = None
    ending_by_timestamp: TimestampSpec | None = None
    timestamp_strategy: Literal["error", "latest"] = "error"
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_partitions: int | None = None
    group_id_prefix: str | None = None

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def client_config(self) -> ClientConfig:
        """How the driver's planning and auxiliary clients reach the cluster."""
        return ClientConfig.of(self.bootstrap, self.consumer_conf)


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Validate and parse reader options; streaming=None (mode not known yet, e.g. when Spark
    asks for the schema at load()) skips the checks that depend on the mode."""
    opts = _lower(options)
    _check_keys(opts, _READ_OPTIONS, _WRITE_OPTIONS, "reading", "writing")
    bootstrap = _bootstrap(opts)
    subscription = _subscription(opts)
    isolation = (
        opts.get("kafka.isolation.level", _default(READ_OPTIONS_DEF, "kafka.isolation.level"))
        .strip()
        .lower()
    )
    if isolation not in ("read_committed", "read_uncommitted"):
        raise OncelogOptionError(
            f"option 'kafka.isolation.level' must be read_committed or read_uncommitted, got {isolation!r}"
        )
    consumer = client_conf(
        {k: v for k, v in opts.items() if k != "kafka.isolation.level"}, _READ_OWNED
    )
    _check_security(bootstrap, consumer)

    default_start = "earliest" if streaming is False else "latest"
    starting = parse_offset_spec(opts.get("startingoffsets", default_start), "startingoffsets")
    ending: OffsetSpec | None = None
    if "endingoffsets" in opts:
        if streaming is True:
            raise OncelogOptionError(
                "option 'endingOffsets' is for batch queries only; a streaming query reads until stopped"
            )
        ending = parse_offset_spec(opts["endingoffsets"], "endingoffsets")
    elif streaming is False:
        ending = "latest"
    if streaming is False:
        if starting == "latest" or (
            isinstance(starting, dict)
            and any(o == LATEST for ps in starting.values() for o in ps.values())
        ):
            raise OncelogOptionError(
                "option 'startingOffsets': 'latest' (-1) is not allowed for batch queries"
            )
        if ending == "earliest" or (
            isinstance(ending, dict)
            and any(o == EARLIEST for ps in ending.values() for o in ps.values())
        ):
            raise OncelogOptionError(
                "option 'endingOffsets': 'earliest' (-2) is not allowed for batch queries"
            )
    for key, spec in (("startingoffsets", starting), ("endingoffsets", ending)):
        if isinstance(spec, dict):
            _check_spec_topics(spec, subscription, key)

    max_offsets = _positive_int(opts, "maxoffsetspertrigger")
    min_offsets = _positive_int(opts, "minoffsetspertrigger")
    if streaming is False:
        for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if key in opts:
                raise OncelogOptionError(
                    f"option '{display(key)}' applies to streaming queries only"
                )
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise OncelogOptionError(
            f"option 'minOffsetsPerTrigger' ({min_offsets}) is above 'maxOffsetsPerTrigger' ({max_offsets})"
        )
    starting_ts = _timestamp_spec(opts, "startingtimestamp", "startingoffsetsbytimestamp")
    ending_ts = _timestamp_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp")
    if ending_ts is not None and streaming is True:
        raise OncelogOptionError(
            "options 'endingTimestamp' / 'endingOffsetsByTimestamp' are for batch queries only"
        )
    for key, ts_spec in (
        ("startingoffsetsbytimestamp", starting_ts),
        ("endingoffsetsbytimestamp", ending_ts),
    ):
        if ts_spec is not None and ts_spec.per_partition is not None:
            _check_spec_topics(ts_spec.per_partition, subscription, key)
    strategy = (
        opts.get(
            "startingoffsetsbytimestampstrategy",
            _default(READ_OPTIONS_DEF, "startingoffsetsbytimestampstrategy"),
        )
        .strip()
        .lower()
    )
    if strategy not in ("error", "latest"):
        raise OncelogOptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got {strategy!r}"
        )
    prefix = opts.get("groupidprefix", "").strip() or None
    return ReadOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_offsets,
        fail_on_data_loss=_bool(
            opts, "failondataloss", _default(READ_OPTIONS_DEF, "failondataloss")
        ),
        include_headers=_bool(opts, "includeheaders", _default(READ_OPTIONS_DEF, "includeheaders")),
        isolation_level=isolation,
        poll_timeout_ms=_positive_int(opts, "kafkaconsumer.polltimeoutms")
        or DEFAULT_POLL_TIMEOUT_MS,
        consumer_conf=consumer,
        starting_by_timestamp=starting_ts,
        ending_by_timestamp=ending_ts,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, "maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        min_partitions=_positive_int(opts, "minpartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition"),
        max_partitions=_positive_int(opts, "maxpartitions"),
        group_id_prefix=prefix,
    )


def _check_spec_topics(spec: dict[str, dict[int, int]], sub: Subscription, key: str) -> None:
    for topic, parts in spec.items():
        if sub.assign is not None:
            if topic not in sub.assign:
                raise OncelogOptionError(
                    f"option '{display(key)}' names topic {topic!r}, which is not in 'assign'"
                )
            extra = sorted(set(parts) - set(sub.assign[topic]))
            if extra:
                raise OncelogOptionError(
                    f"option '{display(key)}' names partitions {extra} of {topic!r}, which are not in 'assign'"
                )
        elif sub.pattern is not None:
            if not re.fullmatch(sub.pattern, topic):
                raise OncelogOptionError(
                    f"option '{display(key)}' names topic {topic!r}, which does not match 'subscribePattern'"
                )
        elif topic not in sub.topics:
            raise OncelogOptionError(
                f"option '{display(key)}' names topic {topic!r}, which is not in 'subscribe'"
            )


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None = None
    exactly_once: bool = True
    transactional_id_prefix: str = DEFAULT_TXN_PREFIX
    transaction_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS
    producer_conf: dict[str, str] = field(default_factory=dict)
    checkpoint: str | None = None  # Spark's checkpointLocation, when given as an option
    include_headers: bool = True  # write the 'headers' column when the input has one
    # exactlyOnce.twoPhaseCommit: "auto" (KIP-939 two-phase-commit task transactions when
    # the broker allows them, else librdkafka's), "true" (required) or "false" (never).
    two_phase_commit: TwoPhaseMode = "auto"

    @property
    def client_config(self) -> ClientConfig:
        """How the driver's commit and auxiliary clients reach the cluster."""
        return ClientConfig.of(self.bootstrap, self.producer_conf)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _lower(options)
    _check_keys(opts, _WRITE_OPTIONS, _READ_OPTIONS, "writing", "reading")
    bootstrap = _bootstrap(opts)
    exactly_once = _bool(opts, "exactlyonce", _default(WRITE_OPTIONS_DEF, "exactlyonce"))
    producer = client_conf(opts, _WRITE_OWNED)
    _check_security(bootstrap, producer)
    idem = producer.get("enable.idempotence")
    if exactly_once and idem is not None and idem.strip().lower() in ("false", "0"):
        raise OncelogOptionError(
            "option 'kafka.enable.idempotence=false' conflicts with 'exactlyOnce=true'"
        )
    prefix = opts.get("transactionalidprefix", DEFAULT_TXN_PREFIX).strip()
    if not _TXN_PREFIX_RE.match(prefix):
        raise OncelogOptionError(
            f"option 'transactionalIdPrefix' must be 1-100 characters of letters, digits, '.', '_' or '-', got {prefix!r}"
        )
    timeout = _positive_int(opts, "transactiontimeoutms") or DEFAULT_TXN_TIMEOUT_MS
    two_phase = _two_phase_mode(opts, exactly_once)
    topic = opts.get("topic", "").strip() or None
    return WriteOptions(
        bootstrap=bootstrap,
        topic=topic,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=timeout,
        producer_conf=producer,
        checkpoint=opts.get("checkpointlocation") or None,
        include_headers=_bool(
            opts, "includeheaders", _default(WRITE_OPTIONS_DEF, "includeheaders")
        ),
        two_phase_commit=two_phase,
    )


def _two_phase_mode(opts: dict[str, str], exactly_once: bool) -> TwoPhaseMode:
    key = "exactlyonce.twophasecommit"
    raw = opts.get(key)
    if raw is None:
        return "auto"
    value = raw.strip().lower()
    if value in ("1", "yes"):
        value = "true"
    if value in ("0", "no"):
        value = "false"
    if value not in ("auto", "true", "false"):
        raise OncelogOptionError(
            f"option '{display(key)}' must be auto, true or false, got {raw!r}"
        )
    if value == "true" and not exactly_once:
        raise OncelogOptionError(
            f"option '{display(key)}=true' needs 'exactlyOnce=true': at-least-once writes open no transaction"
        )
    return "true" if value == "true" else "false" if value == "false" else "auto"
