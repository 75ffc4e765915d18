"""`oncelog console-producer` and `oncelog console-consumer`: Kafka's console tools, on
the client layer's producer and consumer (confluent-kafka's)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from kio.schema.errors import ErrorCode

from oncelog.cli import command_config
from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    client_conf,
    ensure_reachable,
    fail,
)
from oncelog.client.errors import LOCAL_PARTITION_EOF, ClientError

if TYPE_CHECKING:
    from oncelog.client.consumer import Record

Topic = Annotated[str, typer.Option("--topic", "-t")]
Properties = Annotated[
    list[str] | None,
    typer.Option("--property", help="Formatter/reader properties: name=value (repeatable)."),
]
ISOLATION = ("read_uncommitted", "read_committed")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("-1", "all", "0", "1")
UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition


def _props(values: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{flag}: expected name=value, got {item!r}", 2)
        out[key] = value.encode().decode("unicode_escape")  # key.separator=\t as Kafka
    return out


def _true(props: dict[str, str], name: str) -> bool:
    return props.get(name, "false").lower() == "true"


def _client_props(
    path: Path | None, values: list[str] | None, file_flag: str, flag: str
) -> dict[str, str]:
    """Client settings of kafka-console-*.sh: the ``--*.config`` properties file (Java's
    security names translated), overridden by each ``--*-property k=v``, as Kafka merges them."""
    from oncelog.broker.config import BrokerConfigError, parse_properties
    from oncelog.client.java_config import librdkafka_settings
    from oncelog.client.security import ClientConfigError

    out: dict[str, str] = {}
    if path is not None:
        try:
            out = librdkafka_settings(parse_properties(path.read_text()))
        except (OSError, BrokerConfigError, ClientConfigError) as exc:
            fail(f"{file_flag} {path}: {getattr(exc, 'strerror', None) or exc}", 2)
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"{flag}: expected key=value, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


def producer(
    topic: Topic,
    prop: Properties = None,
    producer_property: Annotated[
        list[str] | None,
        typer.Option(
            "--producer-property", help="A producer setting, k=v (repeatable; over the file's)."
        ),
    ] = None,
    producer_config: Annotated[
        Path | None,
        typer.Option("--producer.config", help="Producer settings (a properties file)."),
    ] = None,
    compression_codec: Annotated[
        str | None,
        typer.Option(
            "--compression-codec", help="none, gzip, snappy, lz4 or zstd (compression.type)."
        ),
    ] = None,
    request_required_acks: Annotated[
        str | None,
        typer.Option("--request-required-acks", help="acks: -1 (all, the default), 0 or 1."),
    ] = None,
    sync: Annotated[
        bool,
        typer.Option("--sync", help="Send each record and wait for it before reading the next."),
    ] = False,
    transactional_id: Annotated[
        str | None,
        typer.Option("--transactional-id", help="Send every line in one transaction."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """One record per line of standard input (``--property parse.key=true`` splits each
    line at ``key.separator``, a tab by default)."""
    from oncelog.client.kafka_producer import KafkaProducer

    props = _props(prop, "--property")
    parse_key, sep = _true(props, "parse.key"), props.get("key.separator", "\t")
    extra = _client_props(
        producer_config, producer_property, "--producer.config", "--producer-property"
    )
    # kafka-console-producer.sh: an explicit flag wins over the same setting in the file
    if compression_codec is not None:
        if compression_codec not in CODECS:
            fail(f"--compression-codec {compression_codec}: expected one of {', '.join(CODECS)}", 2)
        extra["compression.type"] = compression_codec
    if request_required_acks is not None:
        if request_required_acks not in ACKS:
            fail(f"--request-required-acks {request_required_acks}: expected -1, all, 0 or 1", 2)
        extra["acks"] = request_required_acks
    if transactional_id:
        extra["transactional.id"] = transactional_id
    ensure_reachable(bootstrap, command_config.client_config(bootstrap, config_file))
    errors: list[str] = []

    def report(err: ClientError | None, _delivered: object) -> None:
        if err is not None:
            errors.append(err.detail or str(err))

    try:
        p = KafkaProducer(client_conf(bootstrap, config_file, **extra))
        if transactional_id:
            p.init_transactions()
            p.begin_transaction()
        for line in sys.stdin:
            text = line.rstrip("\n")
            key: str | None = None
            if parse_key:
                if sep not in text:
                    fail(f"line {text!r} has no key separator {sep!r} (parse.key=true)")
                key, text = text.split(sep, 1)
            p.produce(
                topic,
                value=text.encode(),
                key=key.encode() if key is not None else None,
                on_delivery=report,
                wait_for_space=False,  # a full buffer fails the command, as it always has
            )
            if sync:
                p.flush(30)
                if errors:
                    break
            else:
                p.poll(0)
        if transactional_id:
            p.commit_transaction()
        left = p.flush(30)
    except ClientError as exc:
        fail(f"cannot produce to {topic!r}: {exc.detail or exc}")
    if errors or left:
        fail(f"cannot produce to {topic!r}: {errors[0] if errors else f'{left} records unsent'}")


def _render(msg: Record, props: dict[str, str], output: str) -> str:
    key, value = msg.key, msg.value
    if output == "json":
        return json.dumps(
            {
                "topic": msg.topic,
                "partition": msg.partition,
                "offset": msg.offset,
                "timestamp": msg.timestamp,
                "key": None if key is None else key.decode("utf-8", "replace"),
                "value": None if value is None else value.decode("utf-8", "replace"),
            }
        )
    sep = props.get("key.separator", "\t")
    parts = []
    # the order and spellings of Kafka's DefaultMessageFormatter
    if _true(props, "print.timestamp"):
        kind = msg.timestamp_type
        parts.append(f"{kind}:{msg.timestamp}" if kind else "NO_TIMESTAMP")
    if _true(props, "print.partition"):
        parts.append(f"Partition:{msg.partition}")
    if _true(props, "print.offset"):
        parts.append(f"Offset:{msg.offset}")
    if _true(props, "print.headers"):
        headers = msg.headers
        parts.append(
            props.get("headers.separator", ",").join(
                f"{k}:{'null' if v is None else v.decode('utf-8', 'replace')}" for k, v in headers
            )
            or "NO_HEADERS"
        )
    if _true(props, "print.key"):
        parts.append("null" if key is None else key.decode("utf-8", "replace"))
    if _true(props, "print.value") or "print.value" not in props:
        parts.append("null" if value is None else value.decode("utf-8", "replace"))
    return sep.join(parts)


def consumer(
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="The topic to read.")] = None,
    include: Annotated[
        str | None,
        typer.Option(
            "--include", help="A regular expression: read every topic it matches (whole name)."
        ),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", min=0, help="Only this partition of --topic.")
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option(
            "--offset", help="With --partition: earliest, latest (the default) or an offset."
        ),
    ] = None,
    from_beginning: Annotated[bool, typer.Option("--from-beginning")] = False,
    isolation_level: Annotated[
        str, typer.Option("--isolation-level", help="read_uncommitted or read_committed.")
    ] = "read_uncommitted",
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", help="Consume as this group (commits offsets)."),
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", min=1, help="Exit after this many records.")
    ] = None,
    timeout_ms: Annotated[
        int | None,
        typer.Option("--timeout-ms", min=1, help="Exit after this long without a record."),
    ] = None,
    prop: Properties = None,
    consumer_property: Annotated[
        list[str] | None,
        typer.Option(
            "--consumer-property", help="A consumer setting, k=v (repeatable; over the file's)."
        ),
    ] = None,
    consumer_config: Annotated[
        Path | None,
        typer.Option("--consumer.config", help="Consumer settings (a properties file)."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Print records of a topic (``--property print.key=true``, ``print.partition``,
    ``print.offset``, ``print.timestamp``, ``print.headers``, ``key.separator``,
    ``headers.separator``); ``--output json``: one JSON object a line. Ends with
    "Processed a total of N messages" on stderr."""
    from oncelog.client.consumer import BEGINNING, END, KafkaConsumer

    if isolation_level not in ISOLATION:
        fail(f"--isolation-level {isolation_level}: expected one of {', '.join(ISOLATION)}", 2)
    props = _props(prop, "--property")
    settings = _client_props(
        consumer_config, consumer_property, "--consumer.config", "--consumer-property"
    )
    group = group or settings.pop("group.id", None)
    start = _start(topic, include, partition, offset, from_beginning, group)
    ensure_reachable(bootstrap, command_config.client_config(bootstrap, config_file))
    conf = client_conf(
        bootstrap,
        config_file,
        **{
            # subscribing without --group: a group of its own, committing nothing (as Kafka)
            "group.id": group or f"oncelog-console-consumer-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "isolation.level": isolation_level,
            **settings,
        },
    )
    what = repr(topic) if topic is not None else f"topics matching {include!r}"
    count = 0
    try:
        c = KafkaConsumer(conf)
        try:
            if include is not None:
                c.subscribe([f"^({include})$"])  # Kafka matches the whole topic name
            elif group is not None:
                assert topic is not None  # _start: --topic or --include
                c.subscribe([topic])
            else:
                assert topic is not None
                known = c.partitions(topic, 10)
                if not known:
                    fail(f"unknown topic {topic!r}")
                if partition is not None and partition not in known:
                    fail(f"topic {topic!r} has no partition {partition}")
                if start is None:
                    start = BEGINNING if from_beginning else END
                parts = [partition] if partition is not None else known
                c.assign([(topic, p, start) for p in parts])
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    break
                polled = c.consume(1, 0.1)
                for err in polled.errors:
                    if err.local_code == LOCAL_PARTITION_EOF:
                        continue
                    if include is not None and err.error_code == UNKNOWN_TOPIC:
                        continue  # no topic matches yet: Kafka's consumer waits for one
                    fail(f"cannot consume {what}: {err.detail or err}")
                for msg in polled.records:
                    typer.echo(_render(msg, props, output))
                    count += 1
                    last = time.monotonic()
        finally:
            c.close()
    except ClientError as exc:
        fail(f"cannot consume {what}: {exc.detail or exc}")
    except KeyboardInterrupt:
        pass
    typer.echo(f"Processed a total of {count} messages", err=True)


def _start(
    topic: str | None,
    include: str | None,
    partition: int | None,
    offset: str | None,
    from_beginning: bool,
    group: str | None,
) -> int | None:
    """kafka-console-consumer.sh's rules for --topic/--include, --partition and --offset;
    the offset to start ``partition`` at, None for the default."""
    from oncelog.client.consumer import BEGINNING, END

    if (topic is None) == (include is None):
        fail("exactly one of --topic or --include is required", 2)
    if partition is not None and topic is None:
        fail("--partition needs --topic", 2)
    if partition is not None and group is not None:
        fail("--group and --partition exclude each other", 2)
    if offset is None:
        return None
    if partition is None:
        fail("--offset needs --partition", 2)
    if from_beginning:
        fail("--from-beginning and --offset exclude each other", 2)
    special = {"earliest": BEGINNING, "latest": END}
    if offset in special:
        return special[offset]
    if not offset.isdigit():
        fail(f"--offset {offset}: expected earliest, latest or a non-negative number", 2)
    return int(offset)
