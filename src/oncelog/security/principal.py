"""Kafka principals and ``ssl.principal.mapping.rules`` (KIP-371).

A principal is ``User:<name>``. On a TLS listener with a client certificate the
name comes from the certificate's distinguished name (RFC 2253 form, most
specific RDN first, like Java's ``X500Principal.getName()``), rewritten by the
first mapping rule whose pattern matches the whole DN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?))\s*(?:,|$)")


class MappingRuleError(ValueError):
    pass


def user(name: str) -> str:
    return f"User:{name}"


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT, the DN as it is
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Java's $1 back-references become Python's \g<1>.
        out = self.pattern.sub(re.sub(r"\$(\d+)", r"\\g<\1>", self.replacement), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    rules: list[MappingRule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise MappingRuleError(f"invalid ssl.principal.mapping.rules at {text[pos:]!r}")
        if m.group(1):
            rules.append(MappingRule(None))
        else:
            rules.append(MappingRule(re.compile(m.group(2)), m.group(3), m.group(4)))
        pos = m.end()
    return tuple(rules) or (MappingRule(None),)


def principal_from_dn(dn: str, rules: tuple[MappingRule, ...]) -> str:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return user(name)
    raise MappingRuleError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
