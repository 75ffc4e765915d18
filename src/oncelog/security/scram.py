"""SCRAM credentials (RFC 5802 / RFC 7677) as Kafka stores them: salt, stored
key, server key and iteration count; never the password or the salted password."""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from enum import IntEnum


class ScramMechanism(IntEnum):
    """Kafka's wire codes (AlterUserScramCredentials / DescribeUserScramCredentials)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def sasl_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_sasl_name(cls, name: str) -> ScramMechanism:
        return cls[name.upper().replace("-", "_")]


MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials carries (the client salts) -> what is stored."""
    digest = mechanism.hash_name
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = MAX_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)
