"""``Filter``: drop every record it is applied to. Used with a predicate (and
``negate``) to drop only some records, as Kafka's ``Filter`` is (KIP-585)."""

from __future__ import annotations

from oncelog.connect.api.transforms import R, Transformation


class Filter(Transformation):
    def apply(self, record: R) -> R | None:
        return None
