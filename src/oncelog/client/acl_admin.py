"""ACLs through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls) in
Kafka's own model, ``oncelog.security.acl`` (pure: the enums carry Kafka's names and wire
values), so callers never see librdkafka's types (which call the cluster resource BROKER)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oncelog.client.admin import Admin
from oncelog.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

# The operations librdkafka's AdminClient can send (it has no CREATE_TOKENS, DESCRIBE_TOKENS
# or TWO_PHASE_COMMIT).
SENDABLE_OPERATIONS = frozenset(op for op in AclOperation if op <= AclOperation.IDEMPOTENT_WRITE)


def _to_library(b: AclBinding | AclFilter) -> Any:
    from confluent_kafka import admin as ck

    kind = ck.AclBinding if isinstance(b, AclBinding) else ck.AclBindingFilter
    return kind(
        ck.ResourceType(int(b.resource_type)),
        b.resource_name,  # type: ignore[arg-type]  # None is the filter's documented "any"
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
        PermissionType(int(b.permission_type.value)),
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

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        """DescribeAcls: the ACLs matching the filter."""
        future = self.admin.client.describe_acls(
            _to_library(acl_filter), request_timeout=self.admin.timeout
        )
        return [_from_library(b) for b in self.admin.await_result(future, "DescribeAcls")]

    def delete(self, filters: Iterable[AclFilter]) -> int:
        """DeleteAcls: how many ACLs the filters removed."""
        wanted = [_to_library(f) for f in filters]
        futures = self.admin.client.delete_acls(wanted, request_timeout=self.admin.timeout)
        return sum(len(self.admin.await_result(f, "DeleteAcls")) for f in futures.values())
