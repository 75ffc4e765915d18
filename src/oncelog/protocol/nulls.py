"""Find a null where a request's schema forbids one.

kio decodes a length of -1 (or a compact 0) as None even for an array or string
the schema declares non-nullable, so a handler iterating it would raise. Kafka's
generated parsers reject such a request outright; ``forbidden_null`` names the
first such field so dispatch can do the same before any handler runs. Checkers
are compiled once per kio class into closures, so the produce hot path pays only
a few attribute reads per topic and partition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

# entity -> dotted path of the first forbidden null below it, or None
Checker = Callable[[Any], str | None]


def forbidden_null(entity: Any) -> str | None:
    """The path (``topics[2].name``) of the first null the schema forbids, or None."""
    cls: Any = type(entity)
    return _checker(cls)(entity)


@cache
def _checker(cls: type) -> Checker:
    steps: list[Checker] = []
    for f in dataclasses.fields(cls):
        steps.append(_field_checker(f))

    def check(entity: Any) -> str | None:
        for step in steps:
            found = step(entity)
            if found is not None:
                return found
        return None

    return check


def _field_checker(f: dataclasses.Field[Any]) -> Checker:
    name = f.name
    nullable = is_optional(f)
    kind = classify_field(f)
    inner: Checker | None = None
    if isinstance(kind, EntityTupleField):
        item_checker = _checker(kind.type_)

        def inner(items: Any) -> str | None:
            for i, item in enumerate(items):
                if item is None:
                    return f"[{i}]"
                found = item_checker(item)
                if found is not None:
                    return f"[{i}].{found}"
            return None

    elif isinstance(kind, EntityField):
        entity_checker = _checker(kind.type_)

        def inner(value: Any) -> str | None:
            found = entity_checker(value)
            return None if found is None else f".{found}"

    elif isinstance(kind, PrimitiveTupleField):

        def inner(items: Any) -> str | None:
            for i, item in enumerate(items):
                if item is None:  # array items are never nullable in Kafka's schemas
                    return f"[{i}]"
            return None

    def check(entity: Any) -> str | None:
        value = getattr(entity, name)
        if value is None:
            return None if nullable else name
        if inner is None:
            return None
        found = inner(value)
        return None if found is None else name + found

    return check
