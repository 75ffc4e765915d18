"""The ACL model and matcher (StandardAuthorizer semantics), without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncelog.security.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourceType,
    authorize,
)
from oncelog.security.acl_store import AclStore

Op, Res, Pat, Perm = AclOperation, ResourceType, PatternType, PermissionType
ALICE = "User:alice"


def acl(
    op: AclOperation,
    name: str = "orders",
    *,
    res: ResourceType = Res.TOPIC,
    pat: PatternType = Pat.LITERAL,
    perm: PermissionType = Perm.ALLOW,
    principal: str = ALICE,
    host: str = "*",
) -> AclBinding:
    return AclBinding(res, name, pat, principal, host, op, perm)


def allowed(acls: list[AclBinding], op: AclOperation, name: str = "orders", **kw: object) -> bool:
    args = {"principal": ALICE, "host": "10.0.0.1", "resource_type": Res.TOPIC, **kw}
    return authorize(acls, operation=op, resource_name=name, **args).allowed  # type: ignore[arg-type]


def test_literal_prefixed_wildcard_and_implied_describe() -> None:
    assert allowed([acl(Op.READ)], Op.READ)
    assert allowed([acl(Op.READ)], Op.DESCRIBE)  # READ implies DESCRIBE
    assert not allowed([acl(Op.DESCRIBE)], Op.READ)
    assert not allowed([acl(Op.READ)], Op.READ, "orders2")
    assert allowed([acl(Op.READ, "ord", pat=Pat.PREFIXED)], Op.READ, "orders2")
    assert not allowed([acl(Op.READ, "ord", pat=Pat.PREFIXED)], Op.READ, "xorders")
    assert allowed([acl(Op.WRITE, "*")], Op.WRITE, "anything")
    assert allowed([acl(Op.ALL)], Op.DELETE)
    assert allowed([acl(Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert allowed([acl(Op.READ, principal="User:*")], Op.READ)
    assert not allowed([acl(Op.READ, principal="User:bob")], Op.READ)
    assert not allowed([acl(Op.READ, res=Res.GROUP)], Op.READ)


def test_host_matching() -> None:
    assert allowed([acl(Op.READ, host="10.0.0.1")], Op.READ)
    assert not allowed([acl(Op.READ, host="10.0.0.2")], Op.READ)


def test_deny_wins_and_deny_is_exact() -> None:
    acls = [acl(Op.ALL), acl(Op.WRITE, "ord", pat=Pat.PREFIXED, perm=Perm.DENY)]
    assert not allowed(acls, Op.WRITE)
    assert allowed(acls, Op.READ)
    # a DENY on READ does not deny DESCRIBE (Kafka denies only the op itself or ALL)
    assert allowed([acl(Op.DESCRIBE), acl(Op.READ, perm=Perm.DENY)], Op.DESCRIBE)


def test_super_users_and_no_acl_default() -> None:
    assert allowed([acl(Op.READ, perm=Perm.DENY)], Op.READ, super_users=frozenset({ALICE}))
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, allow_if_no_acl=True)
    # an ACL for someone else on the resource: the default no longer applies
    assert not allowed([acl(Op.READ, principal="User:bob")], Op.READ, allow_if_no_acl=True)


names = st.text(alphabet="abc*", min_size=1, max_size=4)
bindings = st.builds(
    AclBinding,
    st.sampled_from([Res.TOPIC, Res.GROUP]),
    names,
    st.sampled_from([Pat.LITERAL, Pat.PREFIXED]),
    st.sampled_from([ALICE, "User:*", "User:bob"]),
    st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE]),
    st.sampled_from([Perm.ALLOW, Perm.DENY]),
)


@given(
    st.lists(bindings, max_size=6),
    bindings,
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE]),
    names,
)
def test_adding_a_matching_deny_always_denies(
    acls: list[AclBinding], extra: AclBinding, op: AclOperation, name: str
) -> None:
    deny = AclBinding(Res.TOPIC, name, Pat.LITERAL, ALICE, "*", op, Perm.DENY)
    assert not allowed([*acls, extra, deny], op, name)


@given(st.lists(bindings, max_size=6), st.sampled_from([Op.READ, Op.WRITE]), names)
def test_allowed_iff_some_allow_and_no_deny_applies(
    acls: list[AclBinding], op: AclOperation, name: str
) -> None:
    def applies(a: AclBinding) -> bool:
        return (
            a.pattern_matches(Res.TOPIC, name)
            and a.principal in (ALICE, "User:*")
            and a.host in ("*", "10.0.0.1")
        )

    deny = any(
        applies(a) and a.permission is Perm.DENY and a.operation in (op, Op.ALL) for a in acls
    )
    allow = any(
        applies(a) and a.permission is Perm.ALLOW and a.operation in (op, Op.ALL) for a in acls
    )
    assert allowed(acls, op, name) == (allow and not deny)


def test_validation_and_filters() -> None:
    with pytest.raises(InvalidAcl, match="not a valid operation on GROUP"):
        acl(Op.WRITE, res=Res.GROUP).validate().check_operation()
    assert acl(Op.ALL, res=Res.GROUP).check_operation()
    with pytest.raises(InvalidAcl, match="kafka-cluster"):
        acl(Op.CLUSTER_ACTION, "c", res=Res.CLUSTER).validate()
    with pytest.raises(InvalidAcl, match="LITERAL or PREFIXED"):
        acl(Op.READ, pat=Pat.MATCH).validate()
    prefixed = acl(Op.READ, "ord", pat=Pat.PREFIXED)
    literal = acl(Op.READ, "orders")
    match = AclFilter(Res.TOPIC, "orders", Pat.MATCH)
    assert match.matches(prefixed) and match.matches(literal)
    assert not AclFilter(Res.TOPIC, "orders", Pat.PREFIXED).matches(literal)
    assert AclFilter(principal=ALICE, operation=Op.READ).matches(prefixed)
    assert not AclFilter(permission=Perm.DENY).matches(prefixed)


def test_store_is_durable(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    store = AclStore(path).load()
    a, b = acl(Op.READ), acl(Op.WRITE, perm=Perm.DENY)
    store.add([a, b, a])
    assert sorted(AclStore(path).load()) == sorted([a, b])
    assert store.remove([AclFilter(operation=Op.WRITE), AclFilter(resource_type=Res.GROUP)]) == [
        [b],
        [],
    ]
    assert list(AclStore(path).load()) == [a]


def test_authorize_any_follows_kafkas_dominating_deny_rules(tmp_path: Path) -> None:
    """Kafka's Authorizer.authorizeByResourceType (idempotent InitProducerId, KIP-679):
    an ALLOW on some topic counts unless a DENY dominates it."""
    from oncelog.broker.authorizer import Authorizer
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.session import Session

    config = BrokerConfig.build(
        overrides={
            "log.dirs": str(tmp_path),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        }
    )
    session = Session(principal=ALICE)
    stores = iter(range(100))

    def may_write(*acls: AclBinding) -> bool:
        store = AclStore(tmp_path / f"acls-{next(stores)}.json").load()
        store.add(list(acls))
        return Authorizer(config, store).authorize_any(session, Op.WRITE, Res.TOPIC)

    allowed = acl(Op.WRITE, "orders", pat=Pat.PREFIXED)
    assert may_write(allowed)
    # A prefixed DENY on a prefix of the allowed prefix dominates it.
    assert not may_write(allowed, acl(Op.WRITE, "ord", pat=Pat.PREFIXED, perm=Perm.DENY))
    # A DENY on a longer prefix, or on another name, does not.
    assert may_write(allowed, acl(Op.WRITE, "orders-x", pat=Pat.PREFIXED, perm=Perm.DENY))
    assert may_write(allowed, acl(Op.WRITE, "payments", perm=Perm.DENY))
    # The same literal name denied; a literal DENY * denies everything.
    assert not may_write(acl(Op.WRITE, "a"), acl(Op.WRITE, "a", perm=Perm.DENY))
    assert not may_write(allowed, acl(Op.WRITE, "*", perm=Perm.DENY))
    assert may_write(acl(Op.WRITE, "*"), acl(Op.WRITE, "x", pat=Pat.PREFIXED, perm=Perm.DENY))
