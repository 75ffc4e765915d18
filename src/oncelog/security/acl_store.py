"""ACLs kept durably in ``<data dir>/meta/acls.json``, rewritten atomically on change."""

from __future__ import annotations

import json
from pathlib import Path

from oncelog.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from oncelog.storage.fsutil import SECRET_FILE_MODE, atomic_write, restrict_mode


class AclStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._acls: set[AclBinding] = set()

    def load(self) -> AclStore:
        restrict_mode(self.path)
        if self.path.exists():
            self._acls = {
                AclBinding(
                    ResourceType[a["resource_type"]],
                    a["resource_name"],
                    PatternType[a["pattern_type"]],
                    a["principal"],
                    a["host"],
                    AclOperation[a["operation"]],
                    PermissionType[a["permission"]],
                )
                for a in json.loads(self.path.read_text())
            }
        return self

    def _save(self) -> None:
        raw = [
            {
                "resource_type": a.resource_type.name,
                "resource_name": a.resource_name,
                "pattern_type": a.pattern_type.name,
                "principal": a.principal,
                "host": a.host,
                "operation": a.operation.name,
                "permission": a.permission.name,
            }
            for a in sorted(self._acls)
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(raw, indent=1).encode(), mode=SECRET_FILE_MODE)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._acls)

    def __len__(self) -> int:
        return len(self._acls)

    def add(self, acls: list[AclBinding]) -> None:
        new = set(acls) - self._acls
        if new:
            self._acls |= new
            self._save()

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(a for a in self._acls if acl_filter.matches(a))

    def remove(self, acl_filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The ACLs each filter deleted (an ACL counts under every filter it matches)."""
        removed = [self.matching(f) for f in acl_filters]
        gone = {a for group in removed for a in group}
        if gone:
            self._acls -= gone
            self._save()
        return removed
