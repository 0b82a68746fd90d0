"""Connect's exception hierarchy (org.apache.kafka.connect.errors, org.apache.kafka.common.config).

The runtime decides what to do from the class alone: a RetriableException is retried with
back-off (errors.retry.timeout), a DataException is a poison record for errors.tolerance and the
dead-letter queue, any other ConnectException fails the task.
"""
from __future__ import annotations


class ConnectException(Exception):
    """Base of every Connect error (Kafka's ConnectException)."""


class DataException(ConnectException):
    """A value that does not fit its schema, or data a converter cannot read or write."""


class RetriableException(ConnectException):
    """A transient failure (a database restarting, a timeout): the operation may succeed if retried."""


class SchemaBuilderException(DataException):
    """An invalid SchemaBuilder call (a property set twice, a bad default value)."""


class SchemaProjectorException(DataException):
    """A value that cannot be projected to another schema."""


class NotFoundException(ConnectException):
    """An unknown connector, task or plugin."""


class AlreadyExistsException(ConnectException):
    """A connector created under a name already in use."""


class ConfigException(Exception):
    """An invalid configuration value (Kafka's org.apache.kafka.common.config.ConfigException).

    ``ConfigException(name, value, message)`` words it as Kafka does:
    ``Invalid value <value> for configuration <name>: <message>``; a single argument is the message.
    """

    def __init__(self, *args: object) -> None:
        self.config_name: str | None = None
        if len(args) <= 1:
            super().__init__(*args)
            return
        name, value = str(args[0]), args[1]
        message = args[2] if len(args) > 2 else None
        self.config_name = name
        text = f"Invalid value {value} for configuration {name}"
        if message is not None:
            text += f": {message}"
        super().__init__(text)
