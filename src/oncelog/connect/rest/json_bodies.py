"""Request bodies: JSON parsing and the shapes the resources accept (400 otherwise)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from oncelog.connect.api.errors import ConnectRestException


async def json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConnectRestException(400, f"Malformed JSON: {exc}") from None


def string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConnectRestException(400, f"{what} must be a JSON object of string values")
    return dict(value)
