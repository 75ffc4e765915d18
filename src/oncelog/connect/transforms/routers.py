"""Topic routers: ``RegexRouter`` and ``TimestampRouter``, Kafka's transforms of the
same names. Java's regex replacement syntax (``$1``, ``${name}``) and
``SimpleDateFormat`` patterns (``yyyyMMdd``) are kept so existing configs work."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigException, ConfigType, Importance
from oncelog.connect.api.errors import DataException
from oncelog.connect.api.transforms import R, Transformation

_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<([A-Za-z][A-Za-z0-9]*)>")


def compile_regex(name: str, pattern: str) -> re.Pattern[str]:
    try:
        # Java spells named groups (?<name>…); Python needs (?P<name>…).
        return re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))
    except re.error as exc:
        raise ConfigException(name, pattern, f"Invalid regex: {exc}") from None


def java_replacement(match: re.Match[str], replacement: str) -> str:
    """Expand a Java ``Matcher.replaceFirst`` replacement string against ``match``."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i < len(replacement) and replacement[i] == "{":
                end = replacement.index("}", i)
                out.append(match.group(replacement[i + 1 : end]) or "")
                i = end + 1
                continue
            if i == len(replacement) or not replacement[i].isdigit():
                raise ValueError("Illegal group reference")
            # Java takes further digits only while they still name an existing group.
            group = int(replacement[i])
            i += 1
            while (
                i < len(replacement)
                and replacement[i].isdigit()
                and group * 10 + int(replacement[i]) <= (match.re.groups)
            ):
                group = group * 10 + int(replacement[i])
                i += 1
            if group > match.re.groups:
                raise IndexError(f"No group {group}")
            out.append(match.group(group) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class RegexRouter(Transformation):
    REGEX = "regex"
    REPLACEMENT = "replacement"

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(self.REGEX, ConfigType.STRING, importance=Importance.HIGH, documentation="Regular expression to use for matching.",
                    validator=lambda n, v: compile_regex(n, v) and None)
            .define(self.REPLACEMENT, ConfigType.STRING, importance=Importance.HIGH, documentation="Replacement string.")
        )  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.config_def().parse(configs)
        self.regex = compile_regex(self.REGEX, values[self.REGEX])
        self.replacement: str = values[self.REPLACEMENT]

    def apply(self, record: R) -> R | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        # replaceFirst on a full match replaces the whole topic name.
        return record.new_record(topic=java_replacement(match, self.replacement))


_DATE_TOKENS = re.compile(r"'[^']*'|''|([a-zA-Z])\1*|[^a-zA-Z']+")


def format_simple_date(pattern: str, moment: dt.datetime) -> str:
    """Format like Java's ``SimpleDateFormat`` for the common letters
    (y, M, d, H, h, m, s, S, a, E, D); other letters raise ``ValueError``."""
    out: list[str] = []
    for token in _DATE_TOKENS.finditer(pattern):
        text = token.group(0)
        if text == "''":
            out.append("'")
        elif text.startswith("'"):
            out.append(text[1:-1])
        elif not text[0].isalpha():
            out.append(text)
        else:
            out.append(_date_field(text[0], len(text), moment))
    return "".join(out)


def _date_field(letter: str, width: int, m: dt.datetime) -> str:
    if letter == "y":
        return f"{m.year % 100:02d}" if width == 2 else f"{m.year:0{width}d}"
    if letter == "M":
        if width >= 4:
            return m.strftime("%B")
        if width == 3:
            return m.strftime("%b")
        return f"{m.month:0{width}d}"
    numbers = {
        "d": m.day,
        "H": m.hour,
        "h": (m.hour % 12) or 12,
        "m": m.minute,
        "s": m.second,
        "D": m.timetuple().tm_yday,
    }
    if letter in numbers:
        return f"{numbers[letter]:0{width}d}"
    if letter == "S":
        return (
            f"{m.microsecond // 1000:0{max(width, 3)}d}"[:width]
            if width >= 3
            else f"{m.microsecond // 1000:0{width}d}"
        )
    if letter == "a":
        return "AM" if m.hour < 12 else "PM"
    if letter == "E":
        return m.strftime("%A") if width >= 4 else m.strftime("%a")
    raise ValueError(f"Illegal pattern character '{letter}'")


class TimestampRouter(Transformation):
    TOPIC_FORMAT = "topic.format"
    TIMESTAMP_FORMAT = "timestamp.format"

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(self.TOPIC_FORMAT, ConfigType.STRING, "${topic}-${timestamp}", None, Importance.HIGH,
                    "Format string which can contain <code>${topic}</code> and <code>${timestamp}</code> as placeholders for the topic and timestamp, respectively.")
            .define(self.TIMESTAMP_FORMAT, ConfigType.STRING, "yyyyMMdd", None, Importance.HIGH,
                    "Format string for the timestamp that is compatible with <code>java.text.SimpleDateFormat</code>.")
        )  # fmt: skip

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.config_def().parse(configs)
        self.topic_format: str = values[self.TOPIC_FORMAT]
        self.timestamp_format: str = values[self.TIMESTAMP_FORMAT]
        try:
            format_simple_date(self.timestamp_format, dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
        except ValueError as exc:
            raise ConfigException(self.TIMESTAMP_FORMAT, self.timestamp_format, str(exc)) from None

    def apply(self, record: R) -> R | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        moment = dt.datetime.fromtimestamp(record.timestamp / 1000, tz=dt.UTC)
        topic = self.topic_format.replace("${topic}", record.topic).replace(
            "${timestamp}", format_simple_date(self.timestamp_format, moment)
        )
        return record.new_record(topic=topic)
