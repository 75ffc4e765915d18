"""Configuration errors, worded as Kafka's ``org.apache.kafka.common.config.ConfigException``.

In Kafka this exception belongs to the common config package, not to Connect: it is not
a ``ConnectException``. Connect's plugin API subclasses it (``oncelog.connect.api.errors``)
so that its own handlers keep treating configuration errors as Connect errors.
"""

from __future__ import annotations

from typing import Any


class ConfigException(Exception):
    """An invalid configuration value.

    ``ConfigException(name, value, message)`` renders as
    ``Invalid value <value> for configuration <name>: <message>``; the one-argument
    form carries a complete message.
    """

    def __init__(self, name: str, value: Any = None, message: str | None = None) -> None:
        self.config_name = name
        self.config_value = value
        self.reason = message
        if value is None and message is None:
            text = name
        else:
            text = f"Invalid value {value} for configuration {name}"
            if message:
                text += f": {message}"
        super().__init__(text)

    @property
    def complete_message(self) -> bool:
        """Built from one complete message rather than (name, value, reason)."""
        return self.config_value is None and self.reason is None

    def with_prefix(self, prefix: str) -> ConfigException:
        """The same error for the key as seen under ``prefix`` (e.g. ``transforms.x.``)."""
        if self.complete_message:
            return type(self)(str(self))
        return type(self)(prefix + self.config_name, self.config_value, self.reason)


class MissingConfigException(ConfigException):
    """A required key without a value (Kafka's wording from ``ConfigDef.parseValue``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f'Missing required configuration "{name}" which has no default value.')
        self.config_name = name

    def with_prefix(self, prefix: str) -> ConfigException:
        return type(self)(prefix + self.config_name)
