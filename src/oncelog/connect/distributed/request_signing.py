"""Signing of internal REST requests between workers with the cluster's session key
(the ``session-key`` config record), as Kafka Connect's sessioned protocol does.

The sender adds ``X-Connect-Authorization`` (base64 HMAC of the body) and
``X-Connect-Request-Signature-Algorithm``; the receiver recomputes the HMAC with the
current key and refuses a request whose algorithm it does not accept or whose
signature does not match (compared in constant time).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

SIGNATURE_HEADER = "X-Connect-Authorization"
ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"

_DIGESTS = {
    "HmacSHA256": hashlib.sha256,
    "HmacSHA384": hashlib.sha384,
    "HmacSHA512": hashlib.sha512,
}


def sign(key: bytes, body: bytes, algorithm: str = "HmacSHA256") -> dict[str, str]:
    """Headers to add to an internal request."""
    digest = hmac.new(key, body, _DIGESTS[algorithm]).digest()
    return {SIGNATURE_HEADER: base64.b64encode(digest).decode("ascii"), ALGORITHM_HEADER: algorithm}


def refusal(
    key: bytes | None, body: bytes, headers: Mapping[str, str], accepted: list[str]
) -> tuple[int, str] | None:
    """Kafka's answer to an internal request that is not properly signed, as (HTTP
    status, message): 400 without a signature or with an algorithm this worker does not
    accept, 503 while the worker has no session key yet, 403 for a wrong signature.
    None: the request is signed with ``key``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    algorithm = lowered.get(ALGORITHM_HEADER.lower())
    if lowered.get(SIGNATURE_HEADER.lower()) is None or algorithm is None:
        return 400, "Internal request missing required signature"
    if algorithm not in accepted or algorithm not in _DIGESTS:
        return 400, (
            f"This worker does not support the '{algorithm}' key signing algorithm used by other "
            f"workers. This worker is currently configured to use: {accepted}. Check that all "
            "workers' configuration files permit the same set of signature algorithms, and "
            "correct any misconfigured worker and restart it."
        )
    if key is None:
        return 503, (
            "This worker is still starting up and has not been able to read a session key from "
            "the config topic yet"
        )
    reason = verify(key, body, headers, accepted)
    return None if reason is None else (403, "Internal request contained invalid signature.")


def verify(key: bytes, body: bytes, headers: Mapping[str, str], accepted: list[str]) -> str | None:
    """None if the request is signed with ``key``; otherwise why it is refused."""
    lowered = {k.lower(): v for k, v in headers.items()}
    signature = lowered.get(SIGNATURE_HEADER.lower())
    algorithm = lowered.get(ALGORITHM_HEADER.lower())
    if signature is None or algorithm is None:
        return "Internal request missing required signature"
    if algorithm not in accepted or algorithm not in _DIGESTS:
        return f"Internal request signature algorithm {algorithm} is not permitted"
    expected = hmac.new(key, body, _DIGESTS[algorithm]).digest()
    try:
        given = base64.b64decode(signature, validate=True)
    except ValueError:
        return "Internal request signature is not valid base64"
    if not hmac.compare_digest(expected, given):
        return "Internal request contained invalid signature."
    return None
