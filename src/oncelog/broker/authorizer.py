"""The ACL authorizer shell: configuration, durable ACLs, the denial log.

Switched on by ``authorizer.class.name`` (Kafka's StandardAuthorizer, or the
older AclAuthorizer name). Off, every check passes without touching the ACLs.
The decision itself is the pure ``security.acl.authorize``.
"""

from __future__ import annotations

import logging

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.broker.session import Session
from oncelog.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    authorize,
)
from oncelog.security.acl_store import AclStore

# Kafka's authorizer logger name, so existing log filters keep working.
log = logging.getLogger("kafka.authorizer.logger")

ACCEPTED_AUTHORIZERS = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "oncelog.AclAuthorizer",
    }
)


class Authorizer:
    def __init__(self, config: BrokerConfig, store: AclStore) -> None:
        name = config.settings.authorizer_class_name.strip()
        if name and name not in ACCEPTED_AUTHORIZERS:
            raise BrokerConfigError(f"authorizer.class.name: unsupported authorizer {name!r}")
        self.enabled = bool(name)
        self.store = store
        self.super_users = frozenset(
            s.strip() for s in config.settings.super_users.split(";") if s.strip()
        )
        self.allow_if_no_acl = config.settings.allow_everyone_if_no_acl_found

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        if not self.enabled:
            return True
        decision = authorize(
            self.store,
            principal=session.principal,
            host=session.client_host,
            operation=operation,
            resource_type=resource_type,
            resource_name=name,
            super_users=self.super_users,
            allow_if_no_acl=self.allow_if_no_acl,
        )
        if not decision.allowed and log_denied:
            log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s (%s)",
                session.principal,
                operation.name,
                session.client_host,
                resource_type.name,
                name,
                decision.reason,
            )
        return decision.allowed

    def authorize_any(
        self, session: Session, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` on
        some resource of this type? (InitProducerId for idempotence, KIP-679.)"""
        if not self.enabled or session.principal in self.super_users:
            return True
        mine = [
            acl
            for acl in self.store
            if acl.resource_type is resource_type
            and acl.principal in (session.principal, WILDCARD_PRINCIPAL)
            and acl.host in (session.client_host, WILDCARD)
            and acl.operation in (operation, AclOperation.ALL)
        ]
        deny_literal = set()
        deny_prefixed = set()
        allow: list[tuple[PatternType, str]] = []
        for acl in mine:
            if acl.permission is PermissionType.DENY:
                if acl.pattern_type is PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                elif acl.pattern_type is PatternType.PREFIXED:
                    deny_prefixed.add(acl.resource_name)
            elif acl.permission is PermissionType.ALLOW:
                if acl.pattern_type is PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return True
                allow.append((acl.pattern_type, acl.resource_name))
        # An ALLOW counts unless a DENY dominates it: the same literal name, or a
        # prefixed DENY that is a prefix of the allowed name or prefix (Kafka's
        # Authorizer.authorizeByResourceType).
        for pattern, name in allow:
            if pattern is PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        no_acls = not any(acl.resource_type is resource_type for acl in self.store)
        return self.allow_if_no_acl and no_acls
