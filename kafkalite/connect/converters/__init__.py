"""Converters: Connect data <-> the bytes of Kafka record keys, values and headers.

Kafka's seam (org.apache.kafka.connect.storage.Converter / HeaderConverter): the runtime hands a
converter its sub-configuration with the prefix stripped (``value.converter.schemas.enable=false``
arrives as ``schemas.enable``) and whether it serves keys, then calls it per record. A converter
raises DataException for bytes it cannot read or data it cannot write; the runtime's error
handling decides whether that record is dead-lettered.
"""
from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable

from ..config import ConfigDef, ConfigException, Importance, Type, ValidString
from ..data import Schema, SchemaAndValue
from ..errors import ConnectException
from ..records import ConnectHeaders

__all__ = ["Converter", "HeaderConverter", "ConverterType", "converter_config_def", "new_converter",
           "new_header_converter", "CONVERTER_TYPE_CONFIG"]

CONVERTER_TYPE_CONFIG = "converter.type"


class ConverterType:
    KEY = "key"
    VALUE = "value"
    HEADER = "header"


@runtime_checkable
class Converter(Protocol):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None: ...

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None: ...

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue: ...


@runtime_checkable
class HeaderConverter(Protocol):
    def configure(self, configs: Mapping[str, Any]) -> None: ...

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None: ...

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue: ...

    def config(self) -> ConfigDef: ...

    def close(self) -> None: ...


def converter_config_def() -> ConfigDef:
    """Kafka's ConverterConfig: the ``converter.type`` every converter understands."""
    return ConfigDef().define(
        CONVERTER_TYPE_CONFIG, Type.STRING, None,
        ValidString.in_(None, ConverterType.KEY, ConverterType.VALUE, ConverterType.HEADER),
        Importance.LOW, "How this converter will be used.")


def _instantiate(class_name: str) -> Any:
    from ..plugins import PluginError, load_class
    try:
        cls = load_class(class_name)
    except PluginError as exc:
        raise ConfigException(f"Class {class_name} could not be found: {exc}") from None
    try:
        return cls()
    except Exception as exc:
        raise ConnectException(f"Failed to instantiate {class_name}: {exc}") from exc


def new_converter(class_name: str, configs: Mapping[str, Any], is_key: bool) -> Converter:
    """A configured converter of the named class (key.converter / value.converter)."""
    converter = _instantiate(class_name)
    if not isinstance(converter, Converter):
        raise ConfigException(f"{class_name} is not a Converter")
    sub = dict(configs)
    sub.setdefault(CONVERTER_TYPE_CONFIG, ConverterType.KEY if is_key else ConverterType.VALUE)
    converter.configure(sub, is_key)
    return converter


def new_header_converter(class_name: str, configs: Mapping[str, Any]) -> HeaderConverter:
    """A configured header converter (header.converter; SimpleHeaderConverter by default in the worker)."""
    converter = _instantiate(class_name)
    if not isinstance(converter, HeaderConverter):
        raise ConfigException(f"{class_name} is not a HeaderConverter")
    sub = dict(configs)
    sub[CONVERTER_TYPE_CONFIG] = ConverterType.HEADER
    converter.configure(sub)
    return converter
