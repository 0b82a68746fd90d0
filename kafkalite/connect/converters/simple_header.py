"""Kafka's SimpleHeaderConverter: header values as their Values string form in UTF-8, read back
with their schema inferred (``42`` an INT8, ``true`` a BOOLEAN...). The worker's default."""
from __future__ import annotations

from typing import Any, Mapping

from ..config import ConfigDef
from ..data import STRING_SCHEMA, Schema, SchemaAndValue
from ..errors import DataException
from ..values import convert_to_string, parse_string
from . import converter_config_def


class SimpleHeaderConverter:
    """org.apache.kafka.connect.storage.SimpleHeaderConverter."""

    def config(self) -> ConfigDef:
        return converter_config_def()

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(None, None)
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataException(f"Failed to deserialize value for header '{header_key}' on topic '{topic}'") from exc
        if text == "":
            return SchemaAndValue(STRING_SCHEMA, text)
        return parse_string(text)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        return convert_to_string(schema, value).encode("utf-8")
