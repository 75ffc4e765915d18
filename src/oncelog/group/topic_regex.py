"""KIP-848 ``SubscribedTopicRegex``: RE2 syntax, as Kafka's coordinator parses it (RE2/J).

Python's ``re`` accepts patterns Kafka refuses (look-around, back-references), so a client
could subscribe here with a pattern no Kafka broker takes. It can also take exponential
time on a hostile pattern (``(a+)+$``), and the coordinator matches on the event loop.
RE2 matches in linear time. Compiled patterns are cached: each heartbeat and each
metadata change matches every member's pattern against the topic names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is its error, not lines in our log


class InvalidTopicRegex(ValueError):
    """The pattern is not valid RE2 (INVALID_REGULAR_EXPRESSION)."""


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidTopicRegex(f"invalid regular expression '{pattern}': {reason}") from None


def check_topic_regex(pattern: str) -> None:
    """Raise InvalidTopicRegex unless ``pattern`` is valid RE2."""
    _compiled(pattern)


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether the whole topic name matches, as RE2/J's ``Pattern.matches``."""
    try:
        return _compiled(pattern).fullmatch(topic) is not None
    except InvalidTopicRegex:
        return False  # never stored: heartbeats with it are refused


def resolve_topic_regexes(
    regexes: Iterable[str], topic_names: Iterable[str]
) -> dict[str, frozenset[str]]:
    """Each regex -> the topic names it matches (Kafka's GroupMetadataManager
    .refreshRegularExpressions; an invalid one matches nothing, it was refused anyway)."""
    patterns = {}
    for regex in regexes:
        try:
            patterns[regex] = _compiled(regex)
        except InvalidTopicRegex:
            patterns[regex] = None
    matched: dict[str, set[str]] = {regex: set() for regex in patterns}
    for name in topic_names:
        for regex, compiled in patterns.items():
            if compiled is not None and compiled.fullmatch(name) is not None:
                matched[regex].add(name)
    return {regex: frozenset(names) for regex, names in matched.items()}
