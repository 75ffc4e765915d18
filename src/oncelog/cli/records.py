"""`oncelog get-offsets` and `oncelog delete-records`: Kafka's kafka-get-offsets.sh and
kafka-delete-records.sh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    emit,
    fail,
    failures,
    parse_topic_partitions,
    progress,
    table,
)
from oncelog.client.admin import EARLIEST, LATEST, Admin, TopicPartition

ISOLATION = ("read_uncommitted", "read_committed")
# Partitions per DeleteRecords call: the progress bar's step.
DELETE_CHUNK = 50


def _expand(a: Admin, topics: list[str]) -> list[TopicPartition]:
    known = a.topics()
    out: list[TopicPartition] = []
    for topic, parts in parse_topic_partitions(topics):
        if topic not in known:
            fail(f"unknown topic {topic!r}")
        bad = [p for p in parts or () if not 0 <= p < known[topic]]
        if bad:
            fail(f"topic {topic!r} has no partition {bad[0]}")
        out += [(topic, p) for p in (parts if parts is not None else range(known[topic]))]
    return sorted(set(out))


def _time(value: str) -> str | int:
    spec = {"latest": LATEST, "-1": LATEST, "earliest": EARLIEST, "-2": EARLIEST}.get(value)
    if spec is not None:
        return spec
    try:
        ms = int(value)
    except ValueError:
        fail(f"--time {value}: expected earliest (-2), latest (-1) or a timestamp in ms", 2)
    if ms < 0:
        fail(f"--time {value}: expected earliest (-2), latest (-1) or a timestamp in ms", 2)
    return ms


def get_offsets(
    topic: Annotated[
        list[str], typer.Option("--topic", "-t", help="TOPIC or TOPIC:PARTITION,... (repeatable).")
    ],
    time: Annotated[
        str,
        typer.Option("--time", help="earliest (-2), latest (-1), or a timestamp in ms."),
    ] = "latest",
    isolation_level: Annotated[
        str,
        typer.Option(
            "--isolation-level",
            help="read_committed: latest is the last stable offset (LSO); "
            "read_uncommitted: the high watermark.",
        ),
    ] = "read_uncommitted",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Offsets of partitions (ListOffsets), printed as TOPIC:PARTITION:OFFSET."""
    if isolation_level not in ISOLATION:
        fail(f"--isolation-level {isolation_level}: expected one of {', '.join(ISOLATION)}", 2)
    spec = _time(time)
    a = admin(bootstrap, config_file)
    with failures("cannot list offsets"):
        tps = _expand(a, topic)
        offsets = a.list_offsets(tps, spec, read_committed=isolation_level == "read_committed")
    if output == "json":
        emit(
            output, [{"topic": t, "partition": p, "offset": offsets[(t, p)]} for t, p in tps], None
        )
        return
    for t, p in tps:
        typer.echo(f"{t}:{p}:{offsets[(t, p)]}")


def _offset_json(path: Path) -> dict[TopicPartition, int]:
    """kafka-delete-records.sh's file: {"partitions": [{"topic", "partition", "offset"}]}."""
    try:
        doc = json.loads(path.read_text())
        return {(e["topic"], int(e["partition"])): int(e["offset"]) for e in doc["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--offset-json-file {path}: {exc}", 2)


def delete_records(
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", help="TOPIC or TOPIC:PARTITION,... (repeatable)."),
    ] = None,
    before: Annotated[
        int | None,
        typer.Option("--before", help="Delete records below this offset (-1: all of them)."),
    ] = None,
    offset_json_file: Annotated[
        Path | None,
        typer.Option("--offset-json-file", help="Kafka's JSON: per-partition offsets."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Delete records below an offset (DeleteRecords): the log start moves up."""
    if (offset_json_file is None) == (topic is None):
        fail("give --topic with --before, or --offset-json-file", 2)
    if topic is not None and before is None:
        fail("--topic needs --before OFFSET", 2)
    a = admin(bootstrap, config_file)
    with failures("cannot delete records"):
        if offset_json_file is not None:
            plan = _offset_json(offset_json_file)
        else:
            assert before is not None
            plan = {tp: before for tp in _expand(a, topic or [])}
        tps = sorted(plan)
        result: dict[TopicPartition, int] = {}
        with progress(len(tps), "deleting records") as advance:
            for i in range(0, len(tps), DELETE_CHUNK):
                chunk = tps[i : i + DELETE_CHUNK]
                result.update(a.delete_records({tp: plan[tp] for tp in chunk}))
                advance(len(chunk))
    rows = [{"topic": t, "partition": p, "low_watermark": result[(t, p)]} for t, p in tps]
    render = table(
        "records deleted", ("topic", "partition", "low watermark"), [list(r.values()) for r in rows]
    )
    emit(output, rows, render)
