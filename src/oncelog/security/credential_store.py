"""SCRAM credentials kept durably in ``<data dir>/meta/scram_credentials.json``.

The file is rewritten atomically on every change (changes are rare admin calls).
It holds salts and derived keys only, as Kafka's metadata log does.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from oncelog.security.scram import ScramCredential, ScramMechanism
from oncelog.storage.fsutil import SECRET_FILE_MODE, atomic_write, restrict_mode


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentialStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}

    def load(self) -> ScramCredentialStore:
        restrict_mode(self.path)
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            for name, mechs in raw.items():
                self._users[name] = {
                    ScramMechanism[mech]: ScramCredential(
                        base64.b64decode(c["salt"]),
                        base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]),
                        int(c["iterations"]),
                    )
                    for mech, c in mechs.items()
                }
        return self

    def _save(self) -> None:
        raw = {
            name: {
                mech.name: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mech, c in mechs.items()
            }
            for name, mechs in sorted(self._users.items())
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(raw, indent=1).encode(), mode=SECRET_FILE_MODE)

    def get(self, name: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(name, {}).get(mechanism)

    def mechanisms(self, name: str) -> dict[ScramMechanism, ScramCredential]:
        return dict(self._users.get(name, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def apply(
        self,
        upserts: list[tuple[str, ScramMechanism, ScramCredential]],
        deletions: list[tuple[str, ScramMechanism]],
    ) -> None:
        """All changes of one request, then one durable write."""
        for name, mech in deletions:
            mechs = self._users.get(name, {})
            mechs.pop(mech, None)
            if not mechs:
                self._users.pop(name, None)
        for name, mech, credential in upserts:
            self._users.setdefault(name, {})[mech] = credential
        if upserts or deletions:
            self._save()
