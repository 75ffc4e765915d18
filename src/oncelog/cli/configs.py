"""`oncelog configs ...`: Kafka's kafka-configs.sh for topics and the broker."""

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

app = typer.Typer(no_args_is_help=True, help="Describe and alter topic and broker configs.")

Topic = Annotated[str | None, typer.Option("--topic", "-t", help="A topic's configs.")]
BrokerId = Annotated[int | None, typer.Option("--broker", help="The broker's configs (its id).")]
EntityType = Annotated[
    str | None,
    typer.Option(
        "--entity-type", help="topics or brokers, with --entity-name (kafka-configs.sh's form)."
    ),
]
EntityName = Annotated[
    str | None,
    typer.Option("--entity-name", help="The topic's name or the broker's id (with --entity-type)."),
]
# kafka-configs.sh's --entity-type values (and their singulars) -> oncelog's resource kinds.
ENTITY_TYPES = {"topics": "topic", "topic": "topic", "brokers": "broker", "broker": "broker"}


def _resource(
    topic: str | None, broker: int | None, entity_type: str | None, entity_name: str | None
) -> tuple[str, str]:
    """The resource of --topic T / --broker N, or of kafka-configs.sh's
    --entity-type topics|brokers --entity-name X; both spellings must agree."""
    if (entity_type is None) != (entity_name is None):
        fail("--entity-type and --entity-name go together", 2)
    if entity_type is not None and entity_name is not None:
        kind = ENTITY_TYPES.get(entity_type.lower())
        if kind is None:
            fail(f"--entity-type {entity_type}: expected topics or brokers", 2)
        if kind == "broker":
            if not entity_name.isdigit():
                fail(f"--entity-name {entity_name}: a broker's id is a number", 2)
            broker = one_of(broker, int(entity_name), "--broker", "--entity-name")
        else:
            topic = one_of(topic, entity_name, "--topic", "--entity-name")
    if (topic is None) == (broker is None):
        fail("give one of --topic or --broker (or --entity-type and --entity-name)", 2)
    return ("topic", topic) if topic is not None else ("broker", str(broker))


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
    entity_type: EntityType = None,
    entity_name: EntityName = None,
    all_: Annotated[bool, typer.Option("--all", help="Every config, defaults included.")] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """A topic's or the broker's configs: those set explicitly, or --all."""
    kind, name = _resource(topic, broker, entity_type, entity_name)
    with failures(f"cannot describe configs of {kind} {name!r}"):
        entries = admin(bootstrap, config_file).describe_configs(kind, name)
    shown = [e for e in entries if all_ or not e.is_default]
    data = [
        {"name": e.name, "value": e.value, "source": e.source, "sensitive": e.sensitive}
        for e in shown
    ]
    render = table(
        f"{kind} {name}", ("name", "value", "source"), [(e.name, e.value, e.source) for e in shown]
    )
    emit(output, data, render)


@app.command()
def alter(
    topic: Topic = None,
    broker: BrokerId = None,
    entity_type: EntityType = None,
    entity_name: EntityName = None,
    add_config: Annotated[
        list[str] | None, typer.Option("--add-config", help="k=v[,k=v...] (repeatable).")
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="k[,k...]: back to the default.")
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Set or delete configs (IncrementalAlterConfigs)."""
    kind, name = _resource(topic, broker, entity_type, entity_name)
    to_set = _pairs(add_config)
    to_delete = [k.strip() for v in delete_config or [] for k in v.split(",") if k.strip()]
    if not to_set and not to_delete:
        fail("give --add-config and/or --delete-config", 2)
    with failures(f"cannot alter configs of {kind} {name!r}"):
        admin(bootstrap, config_file).alter_configs(kind, name, to_set, to_delete)
    typer.echo(f"altered configs of {kind} {name}")
