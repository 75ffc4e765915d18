"""Exceptions of the connect runtime and plugin API, named after Kafka Connect's."""

from __future__ import annotations

from typing import Any


class ConnectException(Exception):
    """Base error of the connect framework (Kafka's ``ConnectException``)."""


class RetriableException(ConnectException):
    """A transient failure: the framework retries the operation (e.g. ``poll`` or ``put``)."""


class DataException(ConnectException):
    """A record's data cannot be converted, validated or transformed."""


class ConfigException(ConnectException):
    """An invalid configuration value, worded like Kafka's ``ConfigException``.

    ``ConfigException(name, value, message)`` renders as
    ``Invalid value <value> for configuration <name>: <message>``.
    """

    def __init__(self, name: str, value: Any = None, message: str | None = None) -> None:
        self.config_name = name
        self.config_value = value
        self.reason = message
        if value is None and message is None:
            # The one-argument form carries a complete message.
            text = name
        else:
            text = f"Invalid value {value} for configuration {name}"
            if message:
                text += f": {message}"
        super().__init__(text)

    def with_prefix(self, prefix: str) -> ConfigException:
        """The same error for the key as seen under ``prefix`` (e.g. ``transforms.x.``)."""
        if self.config_value is None and self.reason is None:
            return ConfigException(str(self))
        return ConfigException(prefix + self.config_name, self.config_value, self.reason)


class MissingConfigException(ConfigException):
    """A required key without a value (Kafka's wording)."""

    def __init__(self, name: str) -> None:
        super().__init__(f'Missing required configuration "{name}" which has no default value.')
        self.config_name = name

    def with_prefix(self, prefix: str) -> ConfigException:
        return MissingConfigException(prefix + self.config_name)


class NotFoundException(ConnectException):
    """An unknown connector, task or plugin."""


class IllegalWorkerStateException(ConnectException):
    """An operation that the current state of a task or worker does not allow."""


class ConnectRestException(ConnectException):
    """An error the REST API answers with ``status`` and ``{"error_code", "message"}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def body(self) -> dict[str, object]:
        return {"error_code": self.status, "message": str(self)}


class BadRequestException(ConnectRestException):
    def __init__(self, message: str) -> None:
        super().__init__(400, message)


class ProducerFencedError(ConnectException):
    """Another producer with the same transactional id took over: this one is a zombie
    (Kafka's ``ProducerFencedException``), e.g. fenced by a round of zombie fencing."""
