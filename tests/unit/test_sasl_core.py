"""SASL authenticators and the SCRAM credential store, without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from scramp import ScramClient

from oncelog.security.credential_store import ScramCredentialStore
from oncelog.security.sasl import (
    PlainAuthenticator,
    SaslAuthenticationError,
    ScramAuthenticator,
    plain_users_from_jaas,
)
from oncelog.security.scram import ScramMechanism, credential_from_password

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\\"b c";'
)


def test_jaas_users() -> None:
    assert plain_users_from_jaas(JAAS) == {"admin": "admin-secret", "alice": 'a"b c'}


def test_plain() -> None:
    auth = PlainAuthenticator(plain_users_from_jaas(JAAS))
    assert auth.step(b'\0alice\0a"b c') == b"" and auth.principal == "User:alice"
    for token in (b"\0alice\0wrong", b"\0nobody\0x", b"alice\0x", b'bob\0alice\0a"b c'):
        with pytest.raises(SaslAuthenticationError):
            PlainAuthenticator(plain_users_from_jaas(JAAS)).step(token)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_scramp_client(mechanism: str) -> None:
    mech = ScramMechanism.from_sasl_name(mechanism)
    creds = {("carol", mech): credential_from_password(mech, "pw", iterations=4096)}

    def run(user: str, password: str) -> str | None:
        server = ScramAuthenticator(mechanism, lambda u, m: creds.get((u, m)))
        client = ScramClient([mechanism], user, password)
        first = server.step(client.get_client_first().encode())
        client.set_server_first(first.decode())
        final = server.step(client.get_client_final().encode())
        client.set_server_final(final.decode())
        return server.principal

    assert run("carol", "pw") == "User:carol"
    with pytest.raises(SaslAuthenticationError, match="keys don't match"):
        run("carol", "wrong")
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        run("nobody", "pw")


def test_credential_store_is_durable_and_holds_no_password(tmp_path: Path) -> None:
    path = tmp_path / "meta" / "scram.json"
    store = ScramCredentialStore(path).load()
    c256 = credential_from_password(ScramMechanism.SCRAM_SHA_256, "secret-pw", iterations=4096)
    c512 = credential_from_password(ScramMechanism.SCRAM_SHA_512, "secret-pw", iterations=8192)
    store.apply(
        [("u", ScramMechanism.SCRAM_SHA_256, c256), ("u", ScramMechanism.SCRAM_SHA_512, c512)], []
    )
    assert "secret-pw" not in path.read_text()
    again = ScramCredentialStore(path).load()
    assert again.get("u", ScramMechanism.SCRAM_SHA_512) == c512
    again.apply([], [("u", ScramMechanism.SCRAM_SHA_256), ("u", ScramMechanism.SCRAM_SHA_512)])
    assert ScramCredentialStore(path).load().users() == []


def test_credential_and_acl_files_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    import os
    import stat

    from oncelog.security.acl import (
        AclBinding,
        AclOperation,
        PatternType,
        PermissionType,
        ResourceType,
    )
    from oncelog.security.acl_store import AclStore

    old = os.umask(0o022)
    try:
        store = ScramCredentialStore(tmp_path / "meta" / "scram.json").load()
        credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pw", iterations=4096)
        store.apply([("u", ScramMechanism.SCRAM_SHA_256, credential)], [])
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        # A file written before modes were set is tightened when loaded.
        store.path.chmod(0o644)
        ScramCredentialStore(store.path).load()
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        acls = AclStore(tmp_path / "meta" / "acls.json").load()
        acls.add(
            [
                AclBinding(
                    ResourceType.TOPIC,
                    "t",
                    PatternType.LITERAL,
                    "User:u",
                    "*",
                    AclOperation.READ,
                    PermissionType.ALLOW,
                )  # fmt: skip
            ]
        )
        assert stat.S_IMODE(acls.path.stat().st_mode) == 0o600
        acls.path.chmod(0o644)
        AclStore(acls.path).load()
        assert stat.S_IMODE(acls.path.stat().st_mode) == 0o600
    finally:
        os.umask(old)
