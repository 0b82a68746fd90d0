"""TimestampRouter: route to a topic named from the record's topic and timestamp
(``topic.format=${topic}-${timestamp}``, ``timestamp.format=yyyyMMdd``, UTC), e.g. daily tables."""
from __future__ import annotations

from ..config import AbstractConfig, ConfigDef, Importance, Type
from ..data import Timestamp
from ..errors import DataException
from ..records import ConnectRecord
from .base import Transformation
from ..java_time import format_utc, validate_pattern


class TimestampRouter(Transformation):
    """org.apache.kafka.connect.transforms.TimestampRouter"""

    def __init__(self) -> None:
        self.topic_format = "${topic}-${timestamp}"
        self.timestamp_format = "yyyyMMdd"

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic.format", Type.STRING, "${topic}-${timestamp}", None, Importance.HIGH,
                        "Format string which can contain <code>${topic}</code> and <code>${timestamp}</code> as "
                        "placeholders for the topic and timestamp, respectively.")
                .define("timestamp.format", Type.STRING, "yyyyMMdd", None, Importance.HIGH,
                        "Format string for the timestamp that is compatible with "
                        "<code>java.text.SimpleDateFormat</code>."))

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.topic_format = config.get("topic.format")
        self.timestamp_format = config.get("timestamp.format")
        validate_pattern(self.timestamp_format)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = format_utc(Timestamp.to_logical(Timestamp.SCHEMA, record.timestamp), self.timestamp_format)
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic, record.kafka_partition, record.key_schema, record.key, record.value_schema,
                                 record.value, record.timestamp)
