"""Confluent's AvroConverter on kafkalite's schema registry (Confluent's wire format).

``from_connect_data`` maps the Connect schema to Avro (Confluent's AvroData), finds its id in the
registry (registers it under the subject with ``auto.register.schemas``, or takes the subject's
latest version with ``use.latest.version``, else looks it up), and writes magic byte 0, the
4-byte id, then the Avro binary. ``to_connect_data`` reads the id, fetches the writer schema once
per id, and maps the datum back. An unreachable registry is a RetriableException (the runtime
retries with back-off); a schema the registry refuses, or bytes that are not framed Avro, a
DataException (the record is the problem: tolerance and the dead-letter queue apply).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from ...registry.client import RegisteredSchema, RegistryClient, RegistryClientError
from ...registry.serde import SerdeError, decode, encode, parse_avro
from ..config import AbstractConfig, ConfigDef, Importance, Type as ConfigType
from ..data import Schema, SchemaAndValue, Type
from ..errors import ConfigException, DataException, RetriableException
from ..records import ConnectHeaders
from . import CONVERTER_TYPE_CONFIG, ConverterType, converter_config_def
from .avro_data import AvroData

SCHEMA_REGISTRY_URL = "schema.registry.url"
AUTO_REGISTER = "auto.register.schemas"
USE_LATEST_VERSION = "use.latest.version"
CONNECT_META_DATA = "connect.meta.data"
KEY_STRATEGY = "key.subject.name.strategy"
VALUE_STRATEGY = "value.subject.name.strategy"
_STRATEGIES = "io.confluent.kafka.serializers.subject."
TOPIC_NAME_STRATEGY = _STRATEGIES + "TopicNameStrategy"
RECORD_NAME_STRATEGY = _STRATEGIES + "RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = _STRATEGIES + "TopicRecordNameStrategy"


def _strategy(name: str, value: Any) -> None:
    short = str(value).rsplit(".", 1)[-1]
    if short not in ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"):
        raise ConfigException(name, value, "Unknown subject name strategy")


class _StrategyValidator:
    def ensure_valid(self, name: str, value: Any) -> None:
        _strategy(name, value)

    def __str__(self) -> str:
        return "TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy"


def avro_converter_config_def() -> ConfigDef:
    return (ConfigDef(converter_config_def())
            .define(SCHEMA_REGISTRY_URL, ConfigType.LIST, importance=Importance.HIGH,
                    documentation="Comma-separated list of URLs for schema registry instances that can be used "
                                  "to register or look up schemas.")
            .define(AUTO_REGISTER, ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
                    "Specify if the Serializer should attempt to register the Schema with Schema Registry")
            .define(USE_LATEST_VERSION, ConfigType.BOOLEAN, False, None, Importance.LOW,
                    "Specify if the Serializer should use the latest subject version for serialization")
            .define(CONNECT_META_DATA, ConfigType.BOOLEAN, True, None, Importance.LOW,
                    "Allow connect converter to add its meta data to the output schema")
            .define(KEY_STRATEGY, ConfigType.STRING, TOPIC_NAME_STRATEGY, _StrategyValidator(), Importance.MEDIUM,
                    "Determines how to construct the subject name under which the key schema is registered")
            .define(VALUE_STRATEGY, ConfigType.STRING, TOPIC_NAME_STRATEGY, _StrategyValidator(), Importance.MEDIUM,
                    "Determines how to construct the subject name under which the value schema is registered"))


class AvroConverter:
    """io.confluent.connect.avro.AvroConverter."""

    def __init__(self, client: RegistryClient | None = None) -> None:
        self.client = client
        self.is_key = False
        self.auto_register = True
        self.use_latest = False
        self.strategy = TOPIC_NAME_STRATEGY
        self.avro_data = AvroData()
        self._writer_cache: dict[tuple[str, Schema | None], tuple[int, Any]] = {}
        self._reader_cache: dict[int, tuple[Schema, Any]] = {}

    def config(self) -> ConfigDef:
        return avro_converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        settings = dict(configs)
        if is_key is not None:
            settings.setdefault(CONVERTER_TYPE_CONFIG, ConverterType.KEY if is_key else ConverterType.VALUE)
        parsed = AbstractConfig(avro_converter_config_def(), settings)
        self.is_key = bool(is_key) if is_key is not None else parsed.get(CONVERTER_TYPE_CONFIG) == ConverterType.KEY
        urls = parsed.get(SCHEMA_REGISTRY_URL)
        if not urls:
            raise ConfigException(SCHEMA_REGISTRY_URL, "", "Missing Schema registry url!")
        if self.client is None:
            try:
                self.client = RegistryClient(",".join(urls))
            except RegistryClientError as exc:
                raise ConfigException(SCHEMA_REGISTRY_URL, ",".join(urls), str(exc)) from None
        self.auto_register = bool(parsed.get(AUTO_REGISTER))
        self.use_latest = bool(parsed.get(USE_LATEST_VERSION))
        self.strategy = str(parsed.get(KEY_STRATEGY if self.is_key else VALUE_STRATEGY)).rsplit(".", 1)[-1]
        self.avro_data = AvroData(bool(parsed.get(CONNECT_META_DATA)))

    def close(self) -> None:
        self._writer_cache.clear()
        self._reader_cache.clear()

    def _registry(self) -> RegistryClient:
        if self.client is None:
            raise ConfigException(SCHEMA_REGISTRY_URL, None, "Missing Schema registry url!")
        return self.client

    def subject(self, topic: str, avro_schema: Any) -> str:
        """The subject per the configured strategy (Confluent's TopicNameStrategy by default)."""
        if self.strategy == "TopicNameStrategy":
            return f"{topic}-{'key' if self.is_key else 'value'}"
        if not isinstance(avro_schema, dict) or avro_schema.get("type") != "record":
            raise DataException(f"{self.strategy} needs a record schema (a Connect STRUCT)")
        name = str(avro_schema["name"])
        full = f"{avro_schema['namespace']}.{name}" if avro_schema.get("namespace") else name
        return full if self.strategy == "RecordNameStrategy" else f"{topic}-{full}"

    @staticmethod
    def _fail(exc: RegistryClientError, action: str) -> Exception:
        if exc.status == -1 or exc.status >= 500:
            return RetriableException(f"{action}: {exc}")
        return DataException(f"{action}: {exc} (error code {exc.error_code})")

    def _writer(self, topic: str, schema: Schema | None) -> tuple[int, Any]:
        key = (topic, schema)
        cached = self._writer_cache.get(key)
        if cached is not None:
            return cached
        avro_schema = self.avro_data.from_connect_schema(schema)
        text = json.dumps(avro_schema, separators=(",", ":"))
        subject = self.subject(topic, avro_schema)
        registry = self._registry()
        try:
            if self.use_latest and not self.auto_register:
                latest = registry.latest(subject)
                schema_id, parsed = latest.schema_id, parse_avro(latest.schema, latest.dependencies)
            else:
                schema_id = (registry.register(subject, text) if self.auto_register
                             else registry.lookup(subject, text))
                parsed = parse_avro(text)
        except RegistryClientError as exc:
            raise self._fail(exc, f"Error retrieving Avro {'key' if self.is_key else 'value'} schema for subject "
                                  f"{subject}") from exc
        except SerdeError as exc:
            raise DataException(f"Failed to serialize Avro data from topic {topic}: {exc}") from exc
        if len(self._writer_cache) >= 1000:  # Confluent's schemas.cache.config default
            self._writer_cache.clear()
        self._writer_cache[key] = (schema_id, parsed)
        return schema_id, parsed

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None:
        if value is None and (schema is None or schema.default is None):
            return None
        if schema is None:
            raise DataException(f"Failed to serialize Avro data from topic {topic}: a value without a schema")
        schema_id, parsed = self._writer(topic, schema)
        datum = self.avro_data.from_connect_data(schema, value)
        try:
            return encode(schema_id, parsed, datum)
        except SerdeError as exc:
            raise DataException(f"Failed to serialize Avro data from topic {topic}: {exc}") from exc

    def _lookup(self, schema_id: int) -> tuple[RegisteredSchema, Any]:
        try:
            registered = self._registry().by_id(schema_id)
        except RegistryClientError as exc:
            raise self._fail(exc, f"Error retrieving Avro schema for id {schema_id}") from exc
        return registered, parse_avro(registered.schema, registered.dependencies)

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        try:
            schema_id, _, datum = decode(bytes(data), self._lookup)
        except SerdeError as exc:
            raise DataException(f"Failed to deserialize data for topic {topic} to Avro: {exc}") from exc
        cached = self._reader_cache.get(schema_id)
        if cached is None:
            registered, _ = self._lookup(schema_id)
            connect_schema = self.avro_data.to_connect_schema(json.loads(registered.schema))
            if len(self._reader_cache) >= 1000:
                self._reader_cache.clear()
            self._reader_cache[schema_id] = (connect_schema, None)
        else:
            connect_schema = cached[0]
        value = self.avro_data.to_connect_data(connect_schema, datum)
        if connect_schema.type is Type.STRUCT and value is not None:
            value.validate()
        return SchemaAndValue(connect_schema, value)
