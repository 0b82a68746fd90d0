"""Kafka's number converters (Short/Integer/Long/Float/DoubleConverter): Kafka's serializers'
big-endian encodings, so keys written by the Java clients' IntegerSerializer and friends read back."""
from __future__ import annotations

import struct
from typing import Any, Mapping

from ..config import ConfigDef
from ..data import (
    OPTIONAL_FLOAT32_SCHEMA, OPTIONAL_FLOAT64_SCHEMA, OPTIONAL_INT16_SCHEMA, OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA, Schema, SchemaAndValue,
)
from ..errors import DataException
from ..records import ConnectHeaders
from . import converter_config_def


class _NumberConverter:
    type_name = ""
    format: struct.Struct
    schema: Schema
    integral = True

    def config(self) -> ConfigDef:
        return converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        pass

    def close(self) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None:
        if value is None:
            return None
        ok = (isinstance(value, int) if self.integral else isinstance(value, (int, float)))
        if not ok or isinstance(value, bool):
            raise DataException(f"Failed to serialize to {self.type_name} (was {type(value).__name__})")
        try:
            return self.format.pack(value)
        except struct.error as exc:
            raise DataException(f"Failed to serialize to {self.type_name}: {exc}") from exc

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(self.schema, None)
        if len(data) != self.format.size:
            raise DataException(f"Failed to deserialize {self.type_name}: Size of data received by "
                                f"{self.type_name}Deserializer is not {self.format.size}")
        return SchemaAndValue(self.schema, self.format.unpack(bytes(data))[0])

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class ShortConverter(_NumberConverter):
    type_name, format, schema = "Short", struct.Struct(">h"), OPTIONAL_INT16_SCHEMA


class IntegerConverter(_NumberConverter):
    type_name, format, schema = "Integer", struct.Struct(">i"), OPTIONAL_INT32_SCHEMA


class LongConverter(_NumberConverter):
    type_name, format, schema = "Long", struct.Struct(">q"), OPTIONAL_INT64_SCHEMA


class FloatConverter(_NumberConverter):
    type_name, format, schema, integral = "Float", struct.Struct(">f"), OPTIONAL_FLOAT32_SCHEMA, False


class DoubleConverter(_NumberConverter):
    type_name, format, schema, integral = "Double", struct.Struct(">d"), OPTIONAL_FLOAT64_SCHEMA, False
