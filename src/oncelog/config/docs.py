"""Markdown tables of settings, generated from their :class:`ConfigDef` (the way Kafka's
``ConfigDef.toHtml`` documents its configs), and their refresh between marker comments.

A generated table sits between ``<!-- config-table:NAME -->`` and
``<!-- /config-table:NAME -->`` in a docs page; :func:`refresh` rewrites what is between
them and leaves the rest of the page alone.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable

from oncelog.config.config_def import NO_DEFAULT_VALUE, ConfigDef, ConfigKey, convert_to_string

HEADER = "| name | type | default | valid values | importance | description |"
RULE = "|---|---|---|---|---|---|"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(key: ConfigKey) -> str:
    if key.default is NO_DEFAULT_VALUE:
        return "required"
    if key.default is None:
        return "unset"
    text = convert_to_string(key.default, key.type) or ""
    return f"`{_cell(text)}`" if text else '`""`'


def _valid_values(key: ConfigKey) -> str:
    """The validator as Kafka prints it (``[1,...]``, ``[a, b]``); checks written as plain
    functions say their rule in the description instead."""
    check = key.validator
    if check is None or isinstance(check, types.FunctionType | types.LambdaType):
        return ""
    return _cell(str(check))


def row(key: ConfigKey) -> str:
    return (
        f"| `{key.name}` | {key.type.value.lower()} | {_default(key)} | {_valid_values(key)} "
        f"| {key.importance.value.lower()} | {_cell(key.documentation)} |"
    )


def table(keys: Iterable[ConfigKey]) -> str:
    """One markdown table, a row per key in the order given."""
    return "\n".join([HEADER, RULE, *(row(k) for k in keys)])


def grouped_tables(definition: ConfigDef, titles: dict[str, str]) -> str:
    """A ``####`` section and a table per group of ``definition``, in ``titles``' order
    (a group missing from ``titles`` comes last, titled by its own name)."""
    groups: dict[str, list[ConfigKey]] = {}
    for key in definition.keys():
        groups.setdefault(key.group or "other", []).append(key)
    order = [g for g in titles if g in groups] + [g for g in groups if g not in titles]
    parts = [f"#### {titles.get(g, g)}\n\n{table(groups[g])}" for g in order]
    return "\n\n".join(parts)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- config-table:{name} -->", f"<!-- /config-table:{name} -->"


def refresh(page: str, name: str, generated: str) -> str:
    """``page`` with the text between ``name``'s markers replaced by ``generated``;
    ValueError when the page lacks them."""
    start, end = _markers(name)
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(page):
        raise ValueError(f"no {start} ... {end} markers")
    return pattern.sub(lambda _: f"{start}\n{generated}\n{end}", page, count=1)
