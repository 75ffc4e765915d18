"""SCRAM credentials through confluent-kafka's AdminClient (KIP-554:
AlterUserScramCredentials, DescribeUserScramCredentials). Mechanisms are Kafka's
``ScramMechanism`` ids (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)."""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.client.admin import Admin


@dataclass(frozen=True, slots=True)
class ScramCredential:
    user: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


class ScramAdmin:
    """SCRAM users of one cluster; shares the Admin's client and timeout. A failure is the
    ClientError of its Kafka error code."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def upsert(self, user: str, mechanism: int, iterations: int, password: bytes) -> None:
        """Create or replace ``user``'s credential of ``mechanism``."""
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        info = ScramCredentialInfo(ScramMechanism(mechanism), iterations)
        future = self.admin.client.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, password)]
        )[user]
        self.admin.await_result(future, f"AlterUserScramCredentials {user!r}")

    def delete(self, user: str, mechanism: int) -> None:
        """Delete ``user``'s credential of ``mechanism``."""
        from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

        future = self.admin.client.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism(mechanism))]
        )[user]
        self.admin.await_result(future, f"AlterUserScramCredentials {user!r}")

    def describe(self) -> list[ScramCredential]:
        """Every user's credentials (never the secrets), by user."""
        described = self.admin.await_result(
            self.admin.client.describe_user_scram_credentials(), "DescribeUserScramCredentials"
        )
        return [
            ScramCredential(user, info.mechanism.name.replace("_", "-"), info.iterations)
            for user, d in sorted(described.items())
            for info in d.scram_credential_infos
        ]
