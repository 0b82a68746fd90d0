"""Kafka's StringConverter: a value's string form in a character set (``converter.encoding``).

Writing ignores the schema and prints the value as Java's toString would (``true``, ``[a, b]``,
``{k=v}``, ``Struct{f=v}``); reading always gives an optional string.
"""
from __future__ import annotations

import codecs
from typing import Any, Mapping

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type as ConfigType
from ..data import OPTIONAL_STRING_SCHEMA, Schema, SchemaAndValue
from ..errors import DataException
from ..records import ConnectHeaders
from . import CONVERTER_TYPE_CONFIG, ConverterType, converter_config_def
from ..values import java_string

ENCODING_CONFIG = "converter.encoding"


def string_converter_config_def() -> ConfigDef:
    return ConfigDef(converter_config_def()).define(
        ENCODING_CONFIG, ConfigType.STRING, "UTF8", None, Importance.HIGH,
        "The name of the Java character set to use for encoding strings as byte arrays.",
        "Converter", 0, display_name="Character encoding")


class StringConverter:
    """org.apache.kafka.connect.storage.StringConverter (a Converter and a HeaderConverter)."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        return string_converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        settings = dict(configs)
        if is_key is not None:
            settings.setdefault(CONVERTER_TYPE_CONFIG, ConverterType.KEY if is_key else ConverterType.VALUE)
            # Kafka also honours key.converter.encoding / value.converter.encoding here
            side = settings.get("key.converter.encoding" if is_key else "value.converter.encoding")
            if side is not None:
                settings[ENCODING_CONFIG] = side
        encoding = str(AbstractConfig(string_converter_config_def(), settings).get(ENCODING_CONFIG))
        try:
            self.encoding = codecs.lookup(encoding).name
        except LookupError:
            raise ConfigException(ENCODING_CONFIG, encoding, "Unknown character set") from None

    def close(self) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None:
        if value is None:
            return None
        try:
            return java_string(value).encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise DataException(f"Failed to serialize to a string: {exc}") from exc

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        try:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, bytes(data).decode(self.encoding))
        except UnicodeDecodeError as exc:
            raise DataException(f"Failed to deserialize string: {exc}") from exc

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)
