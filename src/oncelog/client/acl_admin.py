"""ACLs through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls) with
Kafka's own types: the enums carry Kafka's names and wire values (``ResourceType``,
``PatternType``, ``AclOperation``, ``AclPermissionType`` of ``org.apache.kafka.common``),
so callers never see librdkafka's (which calls the cluster resource BROKER)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from oncelog.client.admin import Admin


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


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


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's ``AclBinding``: a resource pattern and an access control entry)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """ACLs to describe or delete; None (and the ANY values) match every value."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType


def _to_library(b: AclBinding | AclBindingFilter) -> Any:
    from confluent_kafka import admin as ck

    kind = ck.AclBinding if isinstance(b, AclBinding) else ck.AclBindingFilter
    return kind(
        ck.ResourceType(int(b.resource_type)),
        b.name,  # type: ignore[arg-type]  # None is the filter's documented "any"
        ck.ResourcePatternType(int(b.pattern_type)),
        b.principal,  # type: ignore[arg-type]
        b.host,  # type: ignore[arg-type]
        ck.AclOperation(int(b.operation)),
        ck.AclPermissionType(int(b.permission)),
    )


def _from_library(b: Any) -> AclBinding:
    return AclBinding(
        ResourceType(int(b.restype.value)),
        b.name,
        PatternType(int(b.resource_pattern_type.value)),
        b.principal,
        b.host,
        AclOperation(int(b.operation.value)),
        AclPermissionType(int(b.permission_type.value)),
    )


class AclAdmin:
    """ACL operations of one cluster; shares the Admin's client and timeout. A failure is
    the ClientError of its Kafka error code (SECURITY_DISABLED without an authorizer)."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """CreateAcls; the first binding refused raises its ClientError, whose ``what`` is
        the binding as confluent-kafka spells it."""
        wanted = [_to_library(b) for b in bindings]
        futures = self.admin.client.create_acls(wanted, request_timeout=self.admin.timeout)
        for binding, future in futures.items():
            self.admin.await_result(future, str(binding))

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the ACLs matching the filter."""
        future = self.admin.client.describe_acls(
            _to_library(acl_filter), request_timeout=self.admin.timeout
        )
        return [_from_library(b) for b in self.admin.await_result(future, "DescribeAcls")]

    def delete(self, filters: Iterable[AclBindingFilter]) -> int:
        """DeleteAcls: how many ACLs the filters removed."""
        wanted = [_to_library(f) for f in filters]
        futures = self.admin.client.delete_acls(wanted, request_timeout=self.admin.timeout)
        return sum(len(self.admin.await_result(f, "DeleteAcls")) for f in futures.values())
