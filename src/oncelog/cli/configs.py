"""`oncelog configs ...`: Kafka's kafka-configs.sh for topics, the broker (its own dynamic
configs and the cluster-wide defaults) and groups."""

from __future__ import annotations

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
    one_of,
    table,
)

app = typer.Typer(no_args_is_help=True, help="Describe and alter topic, broker and group configs.")

Topic = Annotated[str | None, typer.Option("--topic", "-t", help="A topic's configs.")]
BrokerId = Annotated[int | None, typer.Option("--broker", help="The broker's configs (its id).")]
BrokerDefaults = Annotated[
    bool,
    typer.Option("--broker-defaults", help="The cluster-wide default broker configs."),
]
Group = Annotated[str | None, typer.Option("--group", help="A group's configs.")]
EntityType = Annotated[
    str | None,
    typer.Option(
        "--entity-type",
        help="topics, brokers or groups, with --entity-name or --entity-default "
        "(kafka-configs.sh's form).",
    ),
]
EntityName = Annotated[
    str | None,
    typer.Option(
        "--entity-name", help="The topic's name, broker's id or group's id (with --entity-type)."
    ),
]
EntityDefault = Annotated[
    bool,
    typer.Option("--entity-default", help="With --entity-type brokers: the cluster-wide defaults."),
]
# kafka-configs.sh's --entity-type values (and their singulars) -> oncelog's resource kinds.
ENTITY_TYPES = {
    "topics": "topic",
    "topic": "topic",
    "brokers": "broker",
    "broker": "broker",
    "groups": "group",
    "group": "group",
}


def _resource(
    topic: str | None,
    broker: int | None,
    entity_type: str | None,
    entity_name: str | None,
    *,
    broker_defaults: bool = False,
    entity_default: bool = False,
    group: str | None = None,
) -> tuple[str, str]:
    """The resource of --topic T / --broker N / --broker-defaults / --group G, or of
    kafka-configs.sh's --entity-type topics|brokers|groups with --entity-name X or
    --entity-default (brokers: the cluster-wide defaults, Kafka's resource name "");
    both spellings must agree."""
    if entity_type is None and (entity_name is not None or entity_default):
        fail("--entity-name and --entity-default need --entity-type", 2)
    if entity_type is not None and (entity_name is None) == (not entity_default):
        fail("--entity-type goes with one of --entity-name or --entity-default", 2)
    if entity_type is not None:
        kind = ENTITY_TYPES.get(entity_type.lower())
        if kind is None:
            fail(f"--entity-type {entity_type}: expected topics, brokers or groups", 2)
        if entity_default:
            if kind != "broker":
                fail("--entity-default: only brokers have defaults here", 2)
            broker_defaults = True
        elif entity_name is not None and kind == "broker":
            if not entity_name.isdigit():
                fail(f"--entity-name {entity_name}: a broker's id is a number", 2)
            broker = one_of(broker, int(entity_name), "--broker", "--entity-name")
        elif kind == "group":
            group = one_of(group, entity_name, "--group", "--entity-name")
        else:
            topic = one_of(topic, entity_name, "--topic", "--entity-name")
    given = [x for x in (topic, broker, group) if x is not None] + ([""] if broker_defaults else [])
    if len(given) != 1:
        fail(
            "give one of --topic, --broker, --broker-defaults or --group "
            "(or --entity-type with --entity-name or --entity-default)",
            2,
        )
    if topic is not None:
        return "topic", topic
    if group is not None:
        return "group", group
    return "broker", "" if broker_defaults else str(broker)


def _label(kind: str, name: str) -> str:
    return (
        "the cluster-wide broker defaults" if (kind, name) == ("broker", "") else f"{kind} {name}"
    )


def _pairs(values: list[str] | None) -> dict[str, str]:
    """``k=v`` items, each possibly ``k1=v1,k2=v2`` as kafka-configs.sh takes them."""
    out: dict[str, str] = {}
    for value in values or []:
        for item in value.split(","):
            key, sep, v = item.partition("=")
            if not sep or not key.strip():
                fail(f"--add-config: expected key=value, got {item!r}", 2)
            out[key.strip()] = v.strip()
    return out


@app.command()
def describe(
    topic: Topic = None,
    broker: BrokerId = None,
    broker_defaults: BrokerDefaults = False,
    group: Group = None,
    entity_type: EntityType = None,
    entity_name: EntityName = None,
    entity_default: EntityDefault = False,
    all_: Annotated[bool, typer.Option("--all", help="Every config, defaults included.")] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """A topic's, the broker's or a group's configs: those set explicitly, or --all."""
    kind, name = _resource(
        topic,
        broker,
        entity_type,
        entity_name,
        broker_defaults=broker_defaults,
        entity_default=entity_default,
        group=group,
    )
    with failures(f"cannot describe configs of {kind} {name!r}"):
        entries = admin(bootstrap, config_file).describe_configs(kind, name)
    shown = [e for e in entries if all_ or not e.is_default]
    data = [
        {"name": e.name, "value": e.value, "source": e.source, "sensitive": e.sensitive}
        for e in shown
    ]
    render = table(
        _label(kind, name),
        ("name", "value", "source"),
        [(e.name, e.value, e.source) for e in shown],
    )
    emit(output, data, render)


@app.command()
def alter(
    topic: Topic = None,
    broker: BrokerId = None,
    broker_defaults: BrokerDefaults = False,
    group: Group = None,
    entity_type: EntityType = None,
    entity_name: EntityName = None,
    entity_default: EntityDefault = False,
    add_config: Annotated[
        list[str] | None, typer.Option("--add-config", help="k=v[,k=v...] (repeatable).")
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="k[,k...]: back to the default.")
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Set or delete configs (IncrementalAlterConfigs); a broker's take effect at once."""
    kind, name = _resource(
        topic,
        broker,
        entity_type,
        entity_name,
        broker_defaults=broker_defaults,
        entity_default=entity_default,
        group=group,
    )
    to_set = _pairs(add_config)
    to_delete = [k.strip() for v in delete_config or [] for k in v.split(",") if k.strip()]
    if not to_set and not to_delete:
        fail("give --add-config and/or --delete-config", 2)
    with failures(f"cannot alter configs of {kind} {name!r}"):
        admin(bootstrap, config_file).alter_configs(kind, name, to_set, to_delete)
    typer.echo(f"altered configs of {_label(kind, name)}")
