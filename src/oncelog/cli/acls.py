"""`oncelog acls add|list|remove`: ACLs through the Admin API, with kafka-acls.sh's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from kio.schema.errors import ErrorCode

from oncelog.cli import common
from oncelog.cli.command_config import Bootstrap, CommandConfig, Output
from oncelog.cli.common import emit, error_text, table
from oncelog.client.acl_admin import SENDABLE_OPERATIONS, AclAdmin
from oncelog.client.errors import ClientError
from oncelog.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourceType,
)

app = typer.Typer(no_args_is_help=True, help="Add, list and remove ACLs (like kafka-acls.sh).")

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


# Kafka answers every ACL request with SECURITY_DISABLED when no authorizer is configured.
NO_AUTHORIZER = (
    "the broker has no authorizer, so it keeps no ACLs: set "
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer to use them"
)


def _admin(bootstrap: str, config: Path | None) -> AclAdmin:
    admin = common.admin(bootstrap, config)
    with common.failures("cannot reach the authorizer"):
        # librdkafka lists no ACLs rather than report SECURITY_DISABLED: ask first.
        if not admin.authorizer_enabled():
            _fail(NO_AUTHORIZER)
    return AclAdmin(admin)


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _failure(what: str, exc: Exception) -> NoReturn:
    """One line for a failed ACL request; SECURITY_DISABLED as what to do about it."""
    if isinstance(exc, ClientError) and exc.error_code == ErrorCode.security_disabled:
        _fail(NO_AUTHORIZER)
    _fail(f"{what}: {error_text(exc)}")


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


def _operation(name: str) -> AclOperation:
    """An --operation value: Kafka's operation names the client can send."""
    op = _enum(AclOperation, name, "--operation")
    if op not in SENDABLE_OPERATIONS:
        raise typer.BadParameter(f"unknown value {name!r}", param_hint="--operation")
    return op  # type: ignore[no-any-return]


def _resources(
    topic: list[str] | None, group: list[str] | None, txn: list[str] | None, cluster: bool
) -> list[tuple[ResourceType, str]]:
    out: list[tuple[ResourceType, str]] = [(ResourceType.TOPIC, t) for t in topic or []]
    out += [(ResourceType.GROUP, g) for g in group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn or []]
    if cluster:
        out.append((ResourceType.CLUSTER, "kafka-cluster"))
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
    producer: Annotated[
        bool,
        typer.Option(
            "--producer",
            help="A producer's ACLs: WRITE, DESCRIBE, CREATE on --topic; WRITE, DESCRIBE on "
            "--transactional-id (as kafka-acls.sh).",
        ),
    ] = False,
    consumer: Annotated[
        bool,
        typer.Option(
            "--consumer",
            help="A consumer's ACLs: READ, DESCRIBE on --topic; READ on --group (as kafka-acls.sh).",
        ),
    ] = False,
    idempotent: Annotated[
        bool,
        typer.Option("--idempotent", help="With --producer: IDEMPOTENT_WRITE on the cluster."),
    ] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
) -> None:
    """Add ALLOW/DENY ACLs for every principal x host x operation x resource given, or a
    producer's / consumer's set of them (--producer, --consumer)."""
    if not (allow_principal or deny_principal):
        _fail("give a principal (--allow-principal or --deny-principal)", 2)
    if producer or consumer:
        grants = _convenience_grants(
            topic, group, transactional_id, cluster, operation, producer, consumer, idempotent
        )
    else:
        if idempotent:
            _fail("--idempotent goes with --producer", 2)
        resources = _resources(topic, group, transactional_id, cluster)
        if not resources or not operation:
            _fail(
                "give a resource (--topic/--group/--transactional-id/--cluster) and --operation,"
                " or --producer/--consumer",
                2,
            )
        ops = [_operation(op) for op in operation or []]
        grants = [(rtype, name, op) for rtype, name in resources for op in ops]
    pattern = _enum(PatternType, resource_pattern_type, "--resource-pattern-type")
    bindings = []
    for permission, principals, hosts in (
        (PermissionType.ALLOW, allow_principal, allow_host),
        (PermissionType.DENY, deny_principal, deny_host),
    ):
        for principal in principals or []:
            for host in hosts or ["*"]:
                for rtype, name, op in grants:
                    bindings.append(
                        AclBinding(rtype, name, pattern, principal, host, op, permission)
                    )
    _check_operations(bindings)
    admin = _admin(bootstrap, config)
    try:
        admin.create(bindings)
    except ClientError as exc:
        # what failed: the binding as confluent-kafka spells it, as this line always had
        _failure(f"cannot add {exc.what}", exc)
    except TimeoutError as exc:
        _failure("cannot add ACLs", exc)
    typer.echo(f"added {len(bindings)} ACL(s)")


def _convenience_grants(
    topic: list[str] | None,
    group: list[str] | None,
    txn: list[str] | None,
    cluster: bool,
    operation: list[str] | None,
    producer: bool,
    consumer: bool,
    idempotent: bool,
) -> list[tuple[Any, str, Any]]:
    """(resource type, name, operation) of kafka-acls.sh's --producer and --consumer
    (AclCommand's getProducerResourceFilterToAcls / getConsumerResourceFilterToAcls)."""
    Op = AclOperation
    if operation:
        _fail("--operation does not go with --producer/--consumer", 2)
    if cluster:
        _fail("--cluster does not go with --producer/--consumer (see --idempotent)", 2)
    if idempotent and not producer:
        _fail("--idempotent goes with --producer", 2)
    if not topic:
        _fail("--producer and --consumer need a --topic", 2)
    if consumer and not group:
        _fail("--consumer needs a --group", 2)
    if txn and not producer:
        _fail("--transactional-id goes with --producer", 2)
    grants: list[tuple[Any, str, Any]] = []
    if producer:
        grants += [
            (ResourceType.TOPIC, t, op) for t in topic for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)
        ]
        grants += [
            (ResourceType.TRANSACTIONAL_ID, t, op)
            for t in txn or []
            for op in (Op.WRITE, Op.DESCRIBE)
        ]
        if idempotent:
            grants.append((ResourceType.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE))
    if consumer:
        grants += [(ResourceType.TOPIC, t, op) for t in topic for op in (Op.READ, Op.DESCRIBE)]
        grants += [(ResourceType.GROUP, g, Op.READ) for g in group or []]
    return list(dict.fromkeys(grants))


def _check_operations(bindings: list[AclBinding]) -> None:
    """Refuse operations a resource type does not have, as kafka-acls.sh does."""
    for b in bindings:
        try:
            b.check_operation()
        except InvalidAcl as exc:
            _fail(str(exc))


def _filter(
    topic: list[str] | None,
    group: list[str] | None,
    txn: list[str] | None,
    cluster: bool,
    pattern_name: str,
    principal: str | None,
    *,
    allow: list[str] | None = None,
    deny: list[str] | None = None,
) -> list[AclFilter]:
    """Filters for the resources given (any without one): one per principal, ALLOW ones
    for ``allow`` and DENY ones for ``deny`` (kafka-acls.sh --remove --allow-principal),
    either permission for ``principal``; every principal when none is given."""
    pattern = _enum(PatternType, pattern_name, "--resource-pattern-type")
    resources: list[tuple[ResourceType, str | None]] = list(
        _resources(topic, group, txn, cluster)
    ) or [(ResourceType.ANY, None)]
    who: list[tuple[str | None, PermissionType]] = [(a, PermissionType.ALLOW) for a in allow or []]
    who += [(d, PermissionType.DENY) for d in deny or []]
    if principal is not None or not who:
        who.append((principal, PermissionType.ANY))
    return [
        AclFilter(rtype, name, pattern, who_principal, None, AclOperation.ANY, permission)
        for rtype, name in resources
        for who_principal, permission in who
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
            found = admin.describe(acl_filter)
        except Exception as exc:
            _failure("cannot list ACLs", exc)
        for a in found:
            rows.append(
                {
                    "resource_type": a.resource_type.name,
                    "resource_name": a.resource_name,
                    "pattern_type": a.pattern_type.name,
                    "principal": a.principal,
                    "host": a.host,
                    "operation": a.operation.name,
                    "permission": a.permission.name,
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
    principal: Annotated[
        str | None, typer.Option("--principal", help="Only this principal's ACLs (any permission).")
    ] = None,
    allow_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-principal", help="Only this principal's ALLOW ACLs (as kafka-acls.sh)."
        ),
    ] = None,
    deny_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--deny-principal", help="Only this principal's DENY ACLs (as kafka-acls.sh)."
        ),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
) -> None:
    """Remove the ACLs on the resources given (optionally only some principals')."""
    if not _resources(topic, group, transactional_id, cluster):
        _fail("give a resource (--topic/--group/--transactional-id/--cluster)", 2)
    filters = _filter(
        topic,
        group,
        transactional_id,
        cluster,
        resource_pattern_type,
        principal,
        allow=allow_principal,
        deny=deny_principal,
    )
    admin = _admin(bootstrap, config)
    try:
        removed = admin.delete(filters)
    except Exception as exc:
        _failure("cannot remove ACLs", exc)
    typer.echo(f"removed {removed} ACL(s)")
