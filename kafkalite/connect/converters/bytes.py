"""Kafka's ByteArrayConverter: the bytes as they are (schema BYTES or none)."""
from __future__ import annotations

from typing import Any, Mapping

from ..config import ConfigDef
from ..data import OPTIONAL_BYTES_SCHEMA, Schema, SchemaAndValue, Type
from ..errors import DataException
from ..records import ConnectHeaders
from . import converter_config_def


class ByteArrayConverter:
    """org.apache.kafka.connect.converters.ByteArrayConverter (a Converter and a HeaderConverter)."""

    def config(self) -> ConfigDef:
        return converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        pass

    def close(self) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, None if data is None else bytes(data))

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)
