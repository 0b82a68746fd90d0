"""A connector's own properties as the runtime reads them (Kafka's ``ConnectorConfig``,
``SourceConnectorConfig``, ``SinkConnectorConfig``): ``name``, ``connector.class``, ``tasks.max``,
``topics`` / ``topics.regex`` (sinks), converter overrides (``key.converter`` and
``key.converter.*``...), ``transforms``, ``predicates`` and the ``errors.*`` settings.

:func:`validate_basics` gives Kafka's messages for the mistakes the REST API must refuse with 400
before a connector is created; the connector's own ``ConfigDef`` is checked by the herder.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from kafkalite.connect.errors import ConfigException

from .errors import ErrorHandlingConfig

NAME, CONNECTOR_CLASS, TASKS_MAX, TOPICS, TOPICS_REGEX = "name", "connector.class", "tasks.max", "topics", "topics.regex"
#: Kafka adds this to every task's configuration: the task's class (TaskConfig.TASK_CLASS_CONFIG)
TASK_CLASS = "task.class"
_ILLEGAL_NAME = re.compile(r"[\x00-\x1f\x7f/]")


@dataclass(frozen=True)
class ConnectorConfig:
    name: str
    connector_class: str
    tasks_max: int
    topics: list[str]
    topics_regex: str
    errors: ErrorHandlingConfig
    props: dict[str, str]

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> "ConnectorConfig":
        p = {str(k): str(v) if not isinstance(v, str) else v for k, v in props.items() if v is not None}
        name = p.get(NAME, "")
        if not p.get(CONNECTOR_CLASS):
            raise ConfigException('Missing required configuration "connector.class" which has no default value.')
        raw_max = p.get(TASKS_MAX, "1").strip()
        try:
            tasks_max = int(raw_max)
        except ValueError:
            raise ConfigException(TASKS_MAX, raw_max, "Not a number of type INT") from None
        if tasks_max < 1:
            raise ConfigException(TASKS_MAX, raw_max, "Value must be at least 1")
        topics = [t.strip() for t in p.get(TOPICS, "").split(",") if t.strip()]
        regex = p.get(TOPICS_REGEX, "").strip()
        if regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ConfigException(TOPICS_REGEX, regex, f"Must be a valid regular expression: {exc}") from None
        return cls(name, p[CONNECTOR_CLASS].strip(), tasks_max, topics, regex, ErrorHandlingConfig.from_props(p), p)

    def client_overrides(self, kind: str) -> dict[str, str]:
        """The connector's ``<kind>.override.*`` client settings (KIP-458), prefix removed."""
        prefix = f"{kind}.override."
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}

    def converter(self, role: str) -> tuple[str, dict[str, str]] | None:
        """A connector's override of ``key.converter``/``value.converter``/``header.converter``."""
        if not self.props.get(role):
            return None
        prefix = role + "."
        return self.props[role], {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}


def validate_name(name: str) -> None:
    if not name or not name.strip():
        raise ConfigException("Connector name is null or empty.")
    if _ILLEGAL_NAME.search(name):
        raise ConfigException(NAME, name, "Connector name cannot contain ISO control characters or '/'")


def validate_sink_topics(cfg: ConnectorConfig, dlq_topic: str | None = None) -> None:
    """Kafka's SinkConnectorConfig.validate: exactly one of topics / topics.regex, and the
    dead-letter topic is not one of the topics read."""
    if cfg.topics and cfg.topics_regex:
        raise ConfigException("topics", ",".join(cfg.topics),
                              "topics and topics.regex are mutually exclusive options, but both are set.")
    if not cfg.topics and not cfg.topics_regex:
        raise ConfigException("Must configure one of topics or topics.regex")
    dlq = dlq_topic if dlq_topic is not None else cfg.errors.dlq_topic
    if dlq and (dlq in cfg.topics or (cfg.topics_regex and re.fullmatch(cfg.topics_regex, dlq))):
        raise ConfigException("errors.deadletterqueue.topic.name", dlq,
                              "The DLQ topic cannot be one of the topics the connector consumes from")


def connector_config_def(sink: bool) -> Any:
    """The properties every connector has (Kafka's ConnectorConfig.configDef, and
    SinkConnectorConfig's for sinks): the first part of a config/validate answer."""
    from kafkalite.connect.config import ConfigDef, Importance, Type
    d = ConfigDef()
    common, transforms, errors = "Common", "Transforms", "Error Handling"
    d.define(NAME, Type.STRING, None, None, Importance.HIGH, "Globally unique name to use for this connector.",
             common, 1, display_name="Connector name")
    d.define(CONNECTOR_CLASS, Type.STRING, None, None, Importance.HIGH,
             "Name or alias of the class for this connector.", common, 2, display_name="Connector class")
    d.define(TASKS_MAX, Type.INT, 1, None, Importance.HIGH, "Maximum number of tasks to use for this connector.",
             common, 3, display_name="Tasks max")
    if sink:
        d.define(TOPICS, Type.LIST, "", None, Importance.HIGH, "List of topics to consume, separated by commas",
                 common, 4, display_name="Topics")
        d.define(TOPICS_REGEX, Type.STRING, "", None, Importance.HIGH,
                 "Regular expression giving topics to consume.", common, 4, display_name="Topics regex")
    for i, role in enumerate(("key.converter", "value.converter", "header.converter")):
        d.define(role, Type.CLASS, None, None, Importance.LOW, f"The {role} class for this connector's records.",
                 common, 5 + i, display_name=role.replace(".", " ").title())
    d.define("transforms", Type.LIST, "", None, Importance.LOW, "Aliases for the transformations to apply.",
             transforms, 1, display_name="Transforms")
    d.define("predicates", Type.LIST, "", None, Importance.LOW, "Aliases for the predicates used by transforms.",
             "Predicates", 1, display_name="Predicates")
    d.define("errors.retry.timeout", Type.LONG, 0, None, Importance.MEDIUM,
             "The maximum duration in milliseconds that a failed operation will be reattempted (-1: forever).",
             errors, 1, display_name="Retry Timeout for Errors")
    d.define("errors.retry.delay.max.ms", Type.LONG, 60000, None, Importance.MEDIUM,
             "The maximum duration in milliseconds between consecutive retry attempts.", errors, 2,
             display_name="Maximum Delay Between Retries for Errors")
    d.define("errors.tolerance", Type.STRING, "none", None, Importance.MEDIUM,
             "Behavior for tolerating errors during connector operation: none or all.", errors, 3,
             display_name="Error Tolerance")
    d.define("errors.log.enable", Type.BOOLEAN, False, None, Importance.MEDIUM,
             "Whether to log the errors and failed operations.", errors, 4, display_name="Log Errors")
    d.define("errors.log.include.messages", Type.BOOLEAN, False, None, Importance.MEDIUM,
             "Whether to include in the log the records that led to a failure.", errors, 5,
             display_name="Log Error Details")
    if sink:
        d.define("errors.deadletterqueue.topic.name", Type.STRING, "", None, Importance.MEDIUM,
                 "The name of the topic to be used as the dead letter queue.", errors, 6,
                 display_name="Dead Letter Queue Topic Name")
        d.define("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3, None, Importance.MEDIUM,
                 "Replication factor used to create the dead letter queue topic.", errors, 7,
                 display_name="Dead Letter Queue Topic Replication Factor")
        d.define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, False, None, Importance.MEDIUM,
                 "If true, add headers containing error context to the messages written to the dead letter queue.",
                 errors, 8, display_name="Enable Error Context Headers")
    return d
