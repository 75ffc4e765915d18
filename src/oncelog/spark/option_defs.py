"""The ``oncelog`` Spark data source's options, declared once (names, types, defaults,
documentation) with :mod:`oncelog.config`: what ``options`` checks option names against
and what docs/spark.md's option tables are generated from. Names and defaults are those
of Spark's built-in Kafka source and sink.
"""

from __future__ import annotations

from oncelog.config.config_def import NO_DEFAULT_VALUE, ConfigDef, ConfigKey, ConfigType, Importance

DEFAULT_TXN_PREFIX = "oncelog-spark"
# Short enough that a transaction nobody can clean up (a deleted checkpoint, another query
# id) pins the output's LSO for one minute only; long enough for a slow micro-batch and a
# quick driver restart between deciding and committing (docs/spark.md, "Timeouts").
DEFAULT_TXN_TIMEOUT_MS = 60_000
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # Spark's maxTriggerDelay default
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000


def _option(
    name: str,
    type_: ConfigType,
    default: object,
    doc: str,
    importance: Importance = Importance.MEDIUM,
) -> ConfigKey:
    return ConfigKey(name, type_, default, importance, doc, display_name=name)


_S, _L, _B, _I = ConfigType.STRING, ConfigType.LONG, ConfigType.BOOLEAN, ConfigType.INT
_BOOTSTRAP = _option(
    "kafka.bootstrap.servers",
    _S,
    NO_DEFAULT_VALUE,
    "required: host:port[,host:port...] (alias `bootstrap.servers`)",
    Importance.HIGH,
)

# The reader's options (Spark's names and defaults), as documented in docs/spark.md. The
# offset and timestamp options are parsed in ``options``; their default depends on the query.
READ_OPTIONS_DEF = ConfigDef(
    [
        _BOOTSTRAP,
        _option(
            "subscribe",
            _S,
            None,
            "exactly one of the three: a comma list of topics",
            Importance.HIGH,
        ),
        _option(
            "subscribePattern",
            _S,
            None,
            "... or a regex over the cluster's topics (internal `__*` topics excluded)",
            Importance.HIGH,
        ),
        _option("assign", _S, None, 'or JSON `{"topic":[0,1]}`', Importance.HIGH),
        _option(
            "startingOffsets",
            _S,
            None,
            '`earliest`, `latest`, or JSON `{"topic":{"0":23,"1":-2}}` (-2 earliest, -1 latest). '
            "Default `latest` (streaming), `earliest` (batch). Partitions missing from the JSON "
            "start at earliest",
            Importance.HIGH,
        ),
        _option(
            "endingOffsets",
            _S,
            None,
            "batch only: `latest` (default) or JSON (-1 latest); partitions missing from the "
            "JSON end at latest",
        ),
        _option(
            "maxOffsetsPerTrigger",
            _L,
            None,
            "streaming: at most this many offsets per micro-batch (admission control, see below)",
        ),
        _option(
            "failOnDataLoss",
            _B,
            True,
            "fail when needed offsets are gone (retention, DeleteRecords, deleted topic); "
            "`false`: skip ahead with a warning",
        ),
        _option(
            "includeHeaders", _B, False, "add `headers array<struct<key:string,value:binary>>`"
        ),
        _option(
            "kafka.isolation.level",
            _S,
            "read_committed",
            "`read_committed` or `read_uncommitted`",
            Importance.HIGH,
        ),
        _option(
            "kafkaConsumer.pollTimeoutMs",
            _L,
            DEFAULT_POLL_TIMEOUT_MS,
            "fail a read that gets no data for this long",
        ),
        _option(
            "startingTimestamp",
            _L,
            None,
            "start every partition at its first offset whose record timestamp is >= this (ms "
            "since the epoch; ListOffsets by timestamp). Takes precedence over the two options "
            "below",
        ),
        _option(
            "startingOffsetsByTimestamp",
            _S,
            None,
            'JSON `{"topic":{"0":1700000000000,...}}`: the same per partition; it must name '
            "every partition read (Spark's rule). Takes precedence over `startingOffsets`",
        ),
        _option(
            "startingOffsetsByTimestampStrategy",
            _S,
            "error",
            "no record at or after the starting timestamp: `error` fails the query naming the "
            "partition; `latest` starts at the latest offset",
        ),
        _option(
            "endingTimestamp",
            _L,
            None,
            "batch only: end (exclusive) at the first offset whose timestamp is >= this; a "
            "partition with no such record ends at latest. Precedence as for starting",
        ),
        _option(
            "endingOffsetsByTimestamp",
            _S,
            None,
            "batch only: the same per partition, JSON as `startingOffsetsByTimestamp`",
        ),
        _option(
            "minOffsetsPerTrigger",
            _L,
            None,
            "streaming: wait until at least this many new offsets are available before "
            "starting a micro-batch ...",
        ),
        _option(
            "maxTriggerDelay",
            _S,
            DEFAULT_MAX_TRIGGER_DELAY,
            "... or until this long passed since the last micro-batch (`500ms`, `30s`, `15m`, "
            "`1h`; a bare number is ms)",
        ),
        _option(
            "minPartitions",
            _I,
            None,
            "at least this many Spark partitions: offset ranges are split in proportion to "
            "their size (Spark's `KafkaOffsetRangeCalculator`), for read parallelism",
        ),
        _option(
            "maxRecordsPerPartition",
            _L,
            None,
            "at most this many offsets per Spark partition (applied before `minPartitions`)",
        ),
        _option(
            "maxPartitions",
            _I,
            None,
            "at most this many Spark partitions (tasks): offset ranges are grouped, the largest "
            "first onto the task with the fewest offsets, and a task reads its ranges one after "
            "another (applied after `minPartitions` and `maxRecordsPerPartition`). One task per "
            "core saves a wave of tasks per micro-batch, and the sink opens one transaction per "
            "task; see docs/performance.md",
        ),
        _option(
            "groupIdPrefix",
            _S,
            None,
            "name the reading consumers (`{groupIdPrefix}-reader`, or exactly `kafka.group.id`; "
            "default `oncelog-spark-reader`). They never join the group nor commit offsets: "
            "the offsets stay in Spark's checkpoint",
        ),
    ]
)

# The writer's options.
WRITE_OPTIONS_DEF = ConfigDef(
    [
        _BOOTSTRAP,
        _option("topic", _S, None, "default topic", Importance.HIGH),
        _option(
            "exactlyOnce",
            _B,
            True,
            "streaming: `true` or `false` (idempotent producers, at-least-once)",
            Importance.HIGH,
        ),
        _option(
            "exactlyOnce.twoPhaseCommit",
            _S,
            "auto",
            "`auto`, `true` or `false`: whether write tasks open two-phase-commit transactions "
            "(KIP-939) with oncelog's own producer; `auto` does when the broker allows it and "
            "uses librdkafka's transactions otherwise, `true` fails the write when the broker "
            "refuses (see *Two-phase commit in the tasks* below)",
        ),
        _option(
            "transactionalIdPrefix",
            _S,
            DEFAULT_TXN_PREFIX,
            "never change it for an existing checkpoint",
            Importance.HIGH,
        ),
        _option(
            "transactionTimeoutMs",
            _L,
            DEFAULT_TXN_TIMEOUT_MS,
            "the task transactions' `transaction.timeout.ms` (see *Timeouts* below); must not "
            "exceed the brokers' `transaction.max.timeout.ms`, which the sink checks once at "
            "query start (DescribeConfigs), failing with a message naming both",
        ),
        _option(
            "includeHeaders",
            _B,
            True,
            "write the `headers` column when the input has one; `false`: ignore it",
        ),
    ]
)
