"""`oncelog acls add|list|remove`: ACLs through the Admin API, with kafka-acls.sh's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from oncelog.cli import command_config
from oncelog.cli.command_config import Bootstrap, CommandConfig, Output
from oncelog.cli.common import client_conf, emit, ensure_reachable, table

app = typer.Typer(no_args_is_help=True, help="Add, list and remove ACLs (like kafka-acls.sh).")
console = Console()
TIMEOUT_S = 15.0

Topic = Annotated[
    list[str] | None, typer.Option("--topic", help="Topic name (repeatable; * for all).")
]
Group = Annotated[list[str] | None, typer.Option("--group", help="Consumer group (repeatable).")]
TxnId = Annotated[
    list[str] | None, typer.Option("--transactional-id", help="Transactional id (repeatable).")
]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
PatternOpt = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type", help="literal | prefixed (add); also any | match (list/remove)."
    ),
]
Operation = Annotated[
    list[str] | None, typer.Option("--operation", help="Read, Write, Describe, ... (repeatable).")
]


def _admin(bootstrap: str, config: Path | None) -> Any:
    from confluent_kafka.admin import AdminClient

    ensure_reachable(bootstrap, command_config.client_config(bootstrap, config))
    return AdminClient(client_conf(bootstrap, config))


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _enum(enum: Any, name: str, flag: str) -> Any:
    key = name.replace("-", "_").upper()
    aliases = {
        "CLUSTERACTION": "CLUSTER_ACTION",
        "IDEMPOTENTWRITE": "IDEMPOTENT_WRITE",
        "DESCRIBECONFIGS": "DESCRIBE_CONFIGS",
        "ALTERCONFIGS": "ALTER_CONFIGS",
    }
    try:
        return enum[aliases.get(key, key)]
    except KeyError:
        raise typer.BadParameter(f"unknown value {name!r}", param_hint=flag) from None


def _resources(
    topic: list[str] | None, group: list[str] | None, txn: list[str] | None, cluster: bool
) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in topic or []]
    out += [(ResourceType.GROUP, g) for g in group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn or []]
    if cluster:
        out.append((ResourceType.BROKER, "kafka-cluster"))
    return out


@app.command()
def add(
    allow_principal: Annotated[list[str] | None, typer.Option("--allow-principal")] = None,
    deny_principal: Annotated[list[str] | None, typer.Option("--deny-principal")] = None,
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host")] = None,
    deny_host: Annotated[list[str] | None, typer.Option("--deny-host")] = None,
    operation: Operation = None,
    topic: Topic = None,
    group: Group = None,
    transactional_id: TxnId = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "literal",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
) -> None:
    """Add ALLOW/DENY ACLs for every principal x host x operation x resource given."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    resources = _resources(topic, group, transactional_id, cluster)
    if not resources or not operation or not (allow_principal or deny_principal):
        _fail(
            "give a resource (--topic/--group/--transactional-id/--cluster), --operation and a principal"
        )
    pattern = _enum(ResourcePatternType, resource_pattern_type, "--resource-pattern-type")
    ops = [_enum(AclOperation, op, "--operation") for op in operation or []]
    bindings = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, allow_principal, allow_host),
        (AclPermissionType.DENY, deny_principal, deny_host),
    ):
        for principal in principals or []:
            for host in hosts or ["*"]:
                for rtype, name in resources:
                    for op in ops:
                        bindings.append(
                            AclBinding(rtype, name, pattern, principal, host, op, permission)
                        )
    _check_operations(bindings)
    admin = _admin(bootstrap, config)
    for binding, future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).items():
        try:
            future.result(TIMEOUT_S)
        except Exception as exc:
            _fail(f"cannot add {binding}: {exc}")
    typer.echo(f"added {len(bindings)} ACL(s)")


def _check_operations(bindings: list[Any]) -> None:
    """Refuse operations a resource type does not have, as kafka-acls.sh does."""
    from oncelog.security.acl import (
        AclBinding,
        AclOperation,
        InvalidAcl,
        PatternType,
        PermissionType,
        ResourceType,
    )

    for b in bindings:
        rtype = ResourceType.CLUSTER if b.restype.name == "BROKER" else ResourceType[b.restype.name]
        try:
            AclBinding(
                rtype,
                b.name,
                PatternType.LITERAL,
                b.principal,
                b.host,
                AclOperation[b.operation.name],
                PermissionType.ALLOW,
            ).check_operation()
        except InvalidAcl as exc:
            _fail(str(exc))


def _filter(
    topic: list[str] | None,
    group: list[str] | None,
    txn: list[str] | None,
    cluster: bool,
    pattern_name: str,
    principal: str | None,
) -> list[Any]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    pattern = _enum(ResourcePatternType, pattern_name, "--resource-pattern-type")
    resources: list[tuple[Any, str | None]] = list(_resources(topic, group, txn, cluster)) or [
        (ResourceType.ANY, None)
    ]
    return [
        # confluent-kafka's stubs say str, but None is its documented "any"
        AclBindingFilter(
            rtype,
            name,  # type: ignore[arg-type]
            pattern,
            principal,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for rtype, name in resources
    ]


@app.command("list")
def list_(
    topic: Topic = None,
    group: Group = None,
    transactional_id: TxnId = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "any",
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
    output: Output = "table",
) -> None:
    """List the ACLs matching the resources given (all without one)."""
    admin = _admin(bootstrap, config)
    rows: list[dict[str, str]] = []
    for acl_filter in _filter(
        topic, group, transactional_id, cluster, resource_pattern_type, principal
    ):
        try:
            found = admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        except Exception as exc:
            _fail(f"cannot list ACLs: {exc}")
        for a in found:
            rows.append(
                {
                    # Kafka's name: confluent-kafka calls the Cluster resource type BROKER
                    "resource_type": "CLUSTER" if a.restype.name == "BROKER" else a.restype.name,
                    "resource_name": a.name,
                    "pattern_type": a.resource_pattern_type.name,
                    "principal": a.principal,
                    "host": a.host,
                    "operation": a.operation.name,
                    "permission": a.permission_type.name,
                }
            )
    columns = ("resource", "pattern", "principal", "host", "operation", "permission")
    cells = [(f"{r['resource_type']}:{r['resource_name']}", *list(r.values())[2:]) for r in rows]
    emit(output, rows, table(None, columns, cells))


@app.command()
def remove(
    topic: Topic = None,
    group: Group = None,
    transactional_id: TxnId = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "literal",
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
) -> None:
    """Remove the ACLs on the resources given (optionally only one principal's)."""
    if not _resources(topic, group, transactional_id, cluster):
        _fail("give a resource (--topic/--group/--transactional-id/--cluster)")
    admin = _admin(bootstrap, config)
    filters = _filter(topic, group, transactional_id, cluster, resource_pattern_type, principal)
    removed = 0
    for future in admin.delete_acls(filters, request_timeout=TIMEOUT_S).values():
        try:
            removed += len(future.result(TIMEOUT_S))
        except Exception as exc:
            _fail(f"cannot remove ACLs: {exc}")
    typer.echo(f"removed {removed} ACL(s)")
