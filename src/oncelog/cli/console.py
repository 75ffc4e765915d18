"""`oncelog console-producer` and `oncelog console-consumer`: Kafka's console tools, on
confluent-kafka's producer and consumer."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

import typer

from oncelog.cli import command_config
from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    client_conf,
    ensure_reachable,
    fail,
)

Topic = Annotated[str, typer.Option("--topic", "-t")]
Properties = Annotated[
    list[str] | None,
    typer.Option("--property", help="Formatter/reader properties: name=value (repeatable)."),
]
ISOLATION = ("read_uncommitted", "read_committed")


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


def producer(
    topic: Topic,
    prop: Properties = None,
    producer_property: Annotated[
        list[str] | None,
        typer.Option("--producer-property", help="librdkafka producer setting: k=v."),
    ] = None,
    transactional_id: Annotated[
        str | None,
        typer.Option("--transactional-id", help="Send every line in one transaction."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """One record per line of standard input (``--property parse.key=true`` splits each
    line at ``key.separator``, a tab by default)."""
    from confluent_kafka import KafkaException, Producer

    props = _props(prop, "--property")
    parse_key, sep = _true(props, "parse.key"), props.get("key.separator", "\t")
    extra = _props(producer_property, "--producer-property")
    if transactional_id:
        extra["transactional.id"] = transactional_id
    ensure_reachable(bootstrap, command_config.client_config(bootstrap, config_file))
    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    try:
        p = Producer(client_conf(bootstrap, config_file, **extra))
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
            )
            p.poll(0)
        if transactional_id:
            p.commit_transaction()
        left = p.flush(30)
    except KafkaException as exc:
        fail(f"cannot produce to {topic!r}: {exc.args[0].str()}")
    except BufferError as exc:
        fail(f"cannot produce to {topic!r}: {exc}")
    if errors or left:
        fail(f"cannot produce to {topic!r}: {errors[0] if errors else f'{left} records unsent'}")


def _render(msg: Any, props: dict[str, str], output: str) -> str:
    key, value = msg.key(), msg.value()
    if output == "json":
        ts_type, ts = msg.timestamp()
        return json.dumps(
            {
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "timestamp": ts,
                "key": None if key is None else key.decode("utf-8", "replace"),
                "value": None if value is None else value.decode("utf-8", "replace"),
            }
        )
    sep = props.get("key.separator", "\t")
    parts = []
    if _true(props, "print.timestamp"):
        parts.append(f"CreateTime:{msg.timestamp()[1]}")
    if _true(props, "print.partition"):
        parts.append(f"Partition:{msg.partition()}")
    if _true(props, "print.offset"):
        parts.append(f"Offset:{msg.offset()}")
    if _true(props, "print.key"):
        parts.append("null" if key is None else key.decode("utf-8", "replace"))
    if _true(props, "print.value") or "print.value" not in props:
        parts.append("null" if value is None else value.decode("utf-8", "replace"))
    return sep.join(parts)


def consumer(
    topic: Topic,
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
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Print records of a topic (``--property print.key=true``, ``print.partition``,
    ``print.offset``, ``print.timestamp``, ``key.separator``); ``--output json``: one JSON
    object a line. Ends with "Processed a total of N messages" on stderr."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition as KTP

    if isolation_level not in ISOLATION:
        fail(f"--isolation-level {isolation_level}: expected one of {', '.join(ISOLATION)}", 2)
    props = _props(prop, "--property")
    ensure_reachable(bootstrap, command_config.client_config(bootstrap, config_file))
    conf = client_conf(
        bootstrap,
        config_file,
        **{
            "group.id": group or "oncelog-console-consumer",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "isolation.level": isolation_level,
        },
    )
    count = 0
    try:
        c = Consumer(conf)
        try:
            if group is not None:
                c.subscribe([topic])
            else:
                md = c.list_topics(topic, timeout=10)
                meta = md.topics.get(topic)
                if meta is None or meta.error is not None or not meta.partitions:
                    fail(f"unknown topic {topic!r}")
                start = OFFSET_BEGINNING if from_beginning else OFFSET_END
                c.assign([KTP(topic, p, start) for p in sorted(meta.partitions)])
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    break
                msg = c.poll(0.1)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    fail(f"cannot consume {topic!r}: {err.str()}")
                typer.echo(_render(msg, props, output))
                count += 1
                last = time.monotonic()
        finally:
            c.close()
    except KafkaException as exc:
        fail(f"cannot consume {topic!r}: {exc.args[0].str()}")
    except KeyboardInterrupt:
        pass
    typer.echo(f"Processed a total of {count} messages", err=True)
