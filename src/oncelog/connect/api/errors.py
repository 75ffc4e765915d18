"""Exceptions of the connect runtime and plugin API, named after Kafka Connect's."""

from __future__ import annotations

from oncelog.config import errors as config_errors


class ConnectException(Exception):
    """Base error of the connect framework (Kafka's ``ConnectException``)."""


class RetriableException(ConnectException):
    """A transient failure: the framework retries the operation (e.g. ``poll`` or ``put``)."""


class DataException(ConnectException):
    """A record's data cannot be converted, validated or transformed."""


class ConfigException(config_errors.ConfigException, ConnectException):
    """An invalid configuration value, worded like Kafka's ``ConfigException``.

    ``ConfigException(name, value, message)`` renders as
    ``Invalid value <value> for configuration <name>: <message>``. In Kafka the class is
    not a ``ConnectException``; here Connect's own is both, so Connect's handlers treat
    configuration errors as Connect errors, as they always have. Errors raised by the
    shared :mod:`oncelog.config` are turned into this class at Connect's API
    (:func:`as_connect_error`).
    """


class MissingConfigException(config_errors.MissingConfigException, ConfigException):
    """A required key without a value (Kafka's wording)."""


def as_connect_error(exc: config_errors.ConfigException) -> ConfigException:
    """``exc`` as Connect's :class:`ConfigException`, with the same message."""
    if isinstance(exc, ConfigException):
        return exc
    if isinstance(exc, config_errors.MissingConfigException):
        return MissingConfigException(exc.config_name)
    if exc.complete_message:
        return ConfigException(str(exc))
    return ConfigException(exc.config_name, exc.config_value, exc.reason)


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
