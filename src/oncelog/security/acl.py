"""Kafka's ACL model and matcher (StandardAuthorizer semantics), pure.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry
(principal, host, operation, ALLOW/DENY). A request is allowed when no DENY
entry matches and some ALLOW entry does; DENY wins. READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies every
operation. A literal ``*`` name and a ``User:*`` principal and ``*`` host are
wildcards. The enum values are Kafka's wire codes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # KIP-939: InitProducerId enable2Pc on a TransactionalId


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Operations whose ALLOW also allows the key (Kafka's AclEntry implied operations).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# Which operations make sense on which resource (kafka-acls.sh refuses the others).
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT}
    ),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


class InvalidAcl(ValueError):
    pass


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def validate(self) -> AclBinding:
        """Kafka's checks on CreateAcls: concrete values only."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl("Invalid resource type")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl("Invalid pattern type: ACLs must be LITERAL or PREFIXED")
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            raise InvalidAcl("Invalid permission type")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl("Invalid operation")
        if not self.resource_name:
            raise InvalidAcl("Resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl("The only valid name for the CLUSTER resource is kafka-cluster")
        if ":" not in self.principal:
            raise InvalidAcl(f"Could not parse principal from {self.principal!r}")
        return self

    def check_operation(self) -> AclBinding:
        """kafka-acls.sh's client-side check (the broker itself accepts any operation)."""
        if self.operation is not AclOperation.ALL and self.operation not in VALID_OPERATIONS.get(
            self.resource_type, frozenset()
        ):
            raise InvalidAcl(
                f"{self.operation.name} is not a valid operation on {self.resource_type.name}"
            )
        return self

    def pattern_matches(self, resource_type: ResourceType, name: str) -> bool:
        """Does this ACL's resource pattern cover the concrete resource?"""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return name.startswith(self.resource_name)

    def describe(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name}) on "
            f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}"
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter: None or ANY fields match anything; MATCH
    patterns select every ACL that would apply to the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and acl.resource_type is not self.resource_type
        ):
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is not None and not (
                acl.pattern_matches(acl.resource_type, self.resource_name)
            ):
                return False
        else:
            if (
                self.pattern_type is not PatternType.ANY
                and acl.pattern_type is not self.pattern_type
            ):
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is PermissionType.ANY or acl.permission is self.permission


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str  # what decided: an ACL, a super user, or the no-ACL default


def authorize(
    acls: Iterable[AclBinding],
    *,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> Decision:
    if principal in super_users:
        return Decision(True, "super user")
    on_resource = [acl for acl in acls if acl.pattern_matches(resource_type, resource_name)]
    if not on_resource:
        return Decision(allow_if_no_acl, "no ACL found (allow.everyone.if.no.acl.found)")
    applicable = [
        acl
        for acl in on_resource
        if acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)
    ]
    for acl in applicable:
        if acl.permission is PermissionType.DENY and acl.operation in (operation, AclOperation.ALL):
            return Decision(False, f"denied by {acl.describe()}")
    allowing = {operation, AclOperation.ALL} | IMPLIED_BY.get(operation, frozenset())
    for acl in applicable:
        if acl.permission is PermissionType.ALLOW and acl.operation in allowing:
            return Decision(True, f"allowed by {acl.describe()}")
    return Decision(False, "no matching ALLOW ACL")
