"""`oncelog topics ...`: topic admin through the standard Admin API, with kafka-topics.sh's
spellings beside oncelog's (``--topic X`` for the positional name, ``--if-exists``,
``--if-not-exists``, describe of every topic when none is named).

As in kafka-topics.sh, ``--topic`` of describe, alter and delete is a regular expression
(Kafka's ``IncludeList``: ``,`` means or, the whole name must match), so ``--topic
'orders-.*'`` describes every orders topic. The positional NAME is always one exact
name: a name with a ``.`` in it never reaches another topic."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, NoReturn

import typer
from kio.schema.errors import ErrorCode

from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    console,
    emit,
    fail,
    failures,
    one_of,
    table,
)
from oncelog.client.admin import EARLIEST, LATEST, Admin
from oncelog.client.errors import ClientError

app = typer.Typer(no_args_is_help=True, help="Create, list, describe, alter and delete topics.")

Name = Annotated[
    str | None, typer.Argument(help="The topic (or --topic NAME, as kafka-topics.sh).")
]
TopicFlag = Annotated[
    str | None,
    typer.Option("--topic", "-t", help="The topic: kafka-topics.sh's spelling of NAME."),
]
TopicPattern = Annotated[
    str | None,
    typer.Option(
        "--topic",
        "-t",
        help="kafka-topics.sh's spelling: a topic name or a regular expression matching "
        "whole names (',' means or).",
    ),
]
IfExists = Annotated[
    bool,
    typer.Option(
        "--if-exists", help="Do nothing, successfully, if the topic does not exist (as Kafka)."
    ),
]


def _targets(name: str | None, pattern: str | None, known: Iterable[str]) -> tuple[str, list[str]]:
    """(what was asked, the topics it means): NAME exactly, or every topic ``--topic``
    matches as kafka-topics.sh's ``IncludeList`` (commas as or, surrounding quotes and
    spaces dropped, full match). Both given must be the same text."""
    asked = one_of(name, pattern, "NAME", "--topic")
    if name is not None:
        return asked, [asked] if asked in known else []
    regex = re.sub(r"^[\"']+|[\"']+$", "", asked.strip().replace(",", "|").replace(" ", ""))
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        fail(f"--topic {asked!r} is not a valid regular expression: {exc}", 2)
    return asked, sorted(t for t in known if compiled.fullmatch(t))


def _none_matched(asked: str, if_exists: bool, nothing_to: str | None = None) -> NoReturn:
    """Nothing is named ``asked``: with --if-exists a success (saying so when
    ``nothing_to`` names the action), otherwise one error line."""
    if if_exists:
        if nothing_to is not None:
            typer.echo(f"no topic {asked}: nothing to {nothing_to}")
        raise typer.Exit(0)
    fail(f"unknown topic {asked!r}")


def _parse_configs(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--config: expected key=value, got {item!r}", 2)
        out[key] = value
    return out


@app.command()
def create(
    name: Name = None,
    topic: TopicFlag = None,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 1,
    replication_factor: Annotated[int, typer.Option("--replication-factor", "-r")] = 1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="key=value topic config")
    ] = None,
    if_not_exists: Annotated[
        bool,
        typer.Option(
            "--if-not-exists", help="Do nothing, successfully, if the topic exists (as Kafka)."
        ),
    ] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Create a topic."""
    name = one_of(name, topic, "NAME", "--topic")
    configs = _parse_configs(config)
    with failures(f"cannot create topic {name!r}"):
        try:
            admin(bootstrap, config_file).create_topics(
                [name], partitions, replication_factor, config=configs, exist_ok=False
            )
        except ClientError as exc:
            # kafka-topics.sh --if-not-exists: an existing topic is no failure
            if if_not_exists and exc.error_code == ErrorCode.topic_already_exists:
                typer.echo(f"topic {name} already exists")
                return
            raise
    typer.echo(f"created topic {name} ({partitions} partitions)")


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    internal: bool = False,
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """List topic names."""
    with failures("cannot list topics"):
        names = admin(bootstrap, config_file).topics()
    shown = sorted(n for n in names if internal or not n.startswith("__"))
    if output == "json":
        emit(output, [{"topic": n, "partitions": names[n]} for n in shown], None)
        return
    for name in shown:
        typer.echo(name)


def _describe_one(a: Admin, name: str, leaders: dict[int, int], topic_id: str) -> dict[str, Any]:
    tps = [(name, p) for p in sorted(leaders)]
    starts = a.list_offsets(tps, EARLIEST, read_committed=False)
    stable = a.list_offsets(tps, LATEST, read_committed=True)
    ends = a.list_offsets(tps, LATEST, read_committed=False)
    overrides = a.topic_config_overrides(name)
    rows = [
        {
            "partition": p,
            "leader": leaders[p],
            "log_start_offset": starts[(name, p)],
            "last_stable_offset": stable[(name, p)],
            "high_watermark": ends[(name, p)],
        }
        for _, p in tps
    ]
    return {
        "topic": name,
        "topic_id": topic_id,
        "partitions": rows,
        "configs": dict(sorted(overrides.items())),
    }


def _print_description(d: dict[str, Any]) -> None:
    # kafka-topics.sh --describe's summary line, tab-separated as Kafka prints it
    configs = ",".join(f"{k}={v}" for k, v in d["configs"].items())
    typer.echo(
        f"Topic: {d['topic']}\tTopicId: {d['topic_id']}\tPartitionCount: {len(d['partitions'])}"
        f"\tReplicationFactor: 1\tConfigs: {configs}"
    )
    console.print(
        table(
            None,
            ("partition", "leader", "log start", "LSO", "high watermark"),
            [list(r.values()) for r in d["partitions"]],
        ),
        soft_wrap=False,
    )


@app.command()
def describe(
    name: Annotated[
        str | None,
        typer.Argument(
            help="The topic (or --topic NAME, as kafka-topics.sh); every topic when neither "
            "is given."
        ),
    ] = None,
    topic: TopicPattern = None,
    internal: Annotated[
        bool, typer.Option("--internal", help="With no topic named: internal topics too.")
    ] = False,
    if_exists: IfExists = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Show topics' ids, partitions, offsets (log start, LSO, high watermark) and
    non-default configs: one topic, or all of them (as kafka-topics.sh --describe)."""
    asked = name if name is not None else topic
    a = admin(bootstrap, config_file)
    with failures(f"cannot describe topic {asked!r}" if asked else "cannot describe topics"):
        known = a.describe_topics()
        if asked is None:
            names = sorted(n for n in known if internal or not n.startswith("__"))
        else:
            asked, names = _targets(name, topic, known)
            if not names:
                _none_matched(asked, if_exists)
        ids = a.topic_ids(names)
        described = [_describe_one(a, n, known[n].leaders, ids[n]) for n in names]
    if output == "json":
        # One topic asked for by its own name: that topic; otherwise the list.
        emit(output, described[0] if names == [asked] else described, None)
        return
    for d in described:
        _print_description(d)


@app.command()
def alter(
    name: Name = None,
    topic: TopicPattern = None,
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", min=1, help="The new (larger) partition count."),
    ] = None,
    if_exists: IfExists = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Add partitions to a topic, or to every topic --topic matches (partitions can never
    be removed)."""
    asked = one_of(name, topic, "NAME", "--topic")
    if partitions is None:
        fail("missing --partitions", 2)
    a = admin(bootstrap, config_file)
    with failures(f"cannot alter topic {asked!r}"):
        counts = a.topics()
        asked, names = _targets(name, topic, counts)
        if not names:
            _none_matched(asked, if_exists, "alter")
        # All checked before any is changed: a refusal alters nothing.
        for n in names:
            if partitions <= counts[n]:
                fail(
                    f"cannot alter topic {n!r}: it has {counts[n]} partitions; "
                    f"--partitions must be more than that"
                )
        for n in names:
            a.create_partitions(n, partitions)
            typer.echo(f"topic {n}: {counts[n]} -> {partitions} partitions")


@app.command()
def delete(
    name: Name = None,
    topic: TopicPattern = None,
    if_exists: IfExists = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Delete a topic and its data, or every topic --topic matches (never an internal
    topic through a pattern)."""
    asked = one_of(name, topic, "NAME", "--topic")
    a = admin(bootstrap, config_file)
    with failures(f"cannot delete topic {asked!r}"):
        if name is not None:
            names = [name]  # the broker answers for a name it does not know
        else:
            asked, names = _targets(None, topic, a.topics())
            names = [n for n in names if not n.startswith("__")]
            if not names:
                _none_matched(asked, if_exists, "delete")
        for n in names:
            try:
                a.delete_topic(n)
            except ClientError as exc:
                if if_exists and exc.error_code == ErrorCode.unknown_topic_or_partition:
                    # (gone since it matched: the other matches are still deleted)
                    typer.echo(f"no topic {n}: nothing to delete")
                    continue
                raise
            typer.echo(f"deleted topic {n}")
