"""ACL bindings and filters to and from the wire shapes of the ACL APIs."""

from __future__ import annotations

from typing import Any

from oncelog.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)


def _enum(enum: Any, value: int) -> Any:
    try:
        return enum(value)
    except ValueError:
        return enum.UNKNOWN


def binding_from_creation(c: Any) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, c.resource_type),
        c.resource_name,
        _enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
        c.principal,
        c.host,
        _enum(AclOperation, c.operation),
        _enum(PermissionType, c.permission_type),
    )


def filter_from_wire(f: Any) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        f.principal_filter,
        f.host_filter,
        _enum(AclOperation, f.operation),
        _enum(PermissionType, f.permission_type),
    )


def filter_is_valid(f: AclFilter) -> bool:
    return not any(
        v.name == "UNKNOWN" for v in (f.resource_type, f.pattern_type, f.operation, f.permission)
    )
