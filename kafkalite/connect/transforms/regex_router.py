"""RegexRouter: rename the topic when it matches ``regex`` as a whole (Java's replaceFirst;
``$1`` in ``replacement`` is the first group)."""
from __future__ import annotations

import re
from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type
from ..records import ConnectRecord
from .base import Transformation

_GROUP = re.compile(r"\\(.)|\$(\d+)|\$\{(\w+)\}")


def java_replacement(replacement: str) -> str:
    """Java's replacement syntax ($1, ${name}, \\$) as Python's (\\g<1>, \\g<name>, $)."""
    def swap(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1).replace("\\", "\\\\")
        return f"\\g<{match.group(2) or match.group(3)}>"
    return _GROUP.sub(swap, replacement.replace("\\\\", "\u0000")).replace("\u0000", "\\\\")


class _RegexValidator:
    def ensure_valid(self, name: str, value: Any) -> None:
        try:
            re.compile(str(value))
        except re.error as exc:
            raise ConfigException(name, value, f"Invalid regex: {exc}") from None

    def __str__(self) -> str:
        return "valid regex"


class RegexRouter(Transformation):
    """org.apache.kafka.connect.transforms.RegexRouter"""

    def __init__(self) -> None:
        self.regex: re.Pattern[str] = re.compile("")
        self.replacement = ""

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("regex", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, _RegexValidator(), Importance.HIGH,
                        "Regular expression to use for matching.")
                .define("replacement", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, None, Importance.HIGH,
                        "Replacement string."))

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.regex = re.compile(config.get("regex"))
        self.replacement = java_replacement(config.get("replacement"))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        topic = match.expand(self.replacement)
        return record.new_record(topic, record.kafka_partition, record.key_schema, record.key, record.value_schema,
                                 record.value, record.timestamp)
