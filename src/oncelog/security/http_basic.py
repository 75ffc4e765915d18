"""HTTP basic authentication headers (RFC 7617), read the same way by every HTTP
listener: the broker's metrics and console listener, and Connect's REST API."""

from __future__ import annotations

import base64
import binascii


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``Basic <base64(user:password)>`` -> (user, password); None when the header is
    missing or is not that. UTF-8, as RFC 7617's ``charset="UTF-8"`` and every browser
    today send it; the password may contain ``:``, the user name may not."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None
