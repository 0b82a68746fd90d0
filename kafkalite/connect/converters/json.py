"""Kafka's JsonConverter: JSON with or without the ``{"schema": ..., "payload": ...}`` envelope.

Byte-for-byte what Kafka's converter writes (compact JSON, keys in Kafka's order: the schema's
``type``, then items/keys/values/fields, ``optional``, ``name``, ``version``, ``doc``,
``parameters``, ``default``; a struct field's schema ends with ``field``), so records written by a
Java worker and by kafkalite's are interchangeable. Logical types travel as Kafka's: Decimal as
base64 bytes (or a JSON number with ``decimal.format=NUMERIC``), Date/Time as int32, Timestamp as
int64. One departure: a JSON value of the wrong kind for its schema (a string where an int32 is
declared) raises DataException instead of Jackson's silent 0, so the record reaches the
dead-letter queue rather than the sink as a wrong number.
"""
from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal
import json
import re
from collections import OrderedDict
from typing import Any, Mapping

from ..config import (
    AbstractConfig, CaseInsensitiveValidString, ConfigDef, Importance, Range, Type as ConfigType,
)
from ..data import (
    Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp, Type, schema_type_of, validate_value,
)
from ..errors import DataException
from ..records import ConnectHeaders
from . import CONVERTER_TYPE_CONFIG, ConverterType, converter_config_def

__all__ = ["JsonConverter", "json_converter_config_def", "as_json_schema", "as_connect_schema"]

SCHEMAS_ENABLE_CONFIG = "schemas.enable"
SCHEMAS_CACHE_SIZE_CONFIG = "schemas.cache.size"
DECIMAL_FORMAT_CONFIG = "decimal.format"

_TYPE_NAMES = {
    Type.BOOLEAN: "boolean", Type.INT8: "int8", Type.INT16: "int16", Type.INT32: "int32", Type.INT64: "int64",
    Type.FLOAT32: "float", Type.FLOAT64: "double", Type.BYTES: "bytes", Type.STRING: "string",
    Type.ARRAY: "array", Type.MAP: "map", Type.STRUCT: "struct",
}
_TYPES_BY_NAME = {name: t for t, name in _TYPE_NAMES.items()}


def json_converter_config_def() -> ConfigDef:
    definition = ConfigDef(converter_config_def())
    definition.define(SCHEMAS_ENABLE_CONFIG, ConfigType.BOOLEAN, True, None, Importance.HIGH,
                      "Include schemas within each of the serialized values and keys.",
                      "Schemas", 0, display_name="Enable Schemas")
    definition.define(SCHEMAS_CACHE_SIZE_CONFIG, ConfigType.INT, 1000, Range.at_least(0), Importance.HIGH,
                      "The maximum number of schemas that can be cached in this converter instance.",
                      "Schemas", 1, display_name="Schema Cache Size")
    definition.define(DECIMAL_FORMAT_CONFIG, ConfigType.STRING, "BASE64",
                      CaseInsensitiveValidString.in_("BASE64", "NUMERIC"), Importance.LOW,
                      "Controls which format this converter will serialize decimals in. This value is case "
                      "insensitive and can be either 'BASE64' (default) or 'NUMERIC'",
                      "Serialization", 0, display_name="Decimal Format")
    return definition


class _Number:
    """A Decimal to be written as a plain JSON number (json.dumps cannot emit one itself)."""

    __slots__ = ("text",)

    def __init__(self, value: decimal.Decimal) -> None:
        self.text = format(value, "f")


_NUMBER_MARK = "\u0000num:"
_NUMBER_RE = re.compile(r'"\\u0000num:([-+0-9.]+)"')


#: one decoder for every record (json.loads would build a new one per call when given parse_float)
_DECODER = json.JSONDecoder(parse_float=decimal.Decimal)


def _dumps(node: Any) -> bytes:
    def default(obj: Any) -> Any:
        if isinstance(obj, _Number):
            return _NUMBER_MARK + obj.text
        raise TypeError(f"not JSON serializable: {type(obj).__name__}")

    text = json.dumps(node, separators=(",", ":"), ensure_ascii=False, default=default, allow_nan=True)
    if _NUMBER_MARK[1:] in text:
        text = _NUMBER_RE.sub(lambda m: m.group(1), text)
    return text.encode("utf-8")


def as_json_schema(schema: Schema | None, numeric_decimals: bool = False) -> dict[str, Any] | None:
    """A Connect schema in the envelope's JSON form (Kafka's JsonConverter.asJsonSchema)."""
    if schema is None:
        return None
    node: dict[str, Any] = {"type": _TYPE_NAMES[schema.type]}
    if schema.type is Type.ARRAY:
        node["items"] = as_json_schema(schema.value_schema, numeric_decimals)
    elif schema.type is Type.MAP:
        node["keys"] = as_json_schema(schema.key_schema, numeric_decimals)
        node["values"] = as_json_schema(schema.value_schema, numeric_decimals)
    elif schema.type is Type.STRUCT:
        fields = []
        for field in schema.fields:
            field_node = dict(as_json_schema(field.schema, numeric_decimals) or {})
            field_node["field"] = field.name
            fields.append(field_node)
        node["fields"] = fields
    node["optional"] = schema.optional
    if schema.name is not None:
        node["name"] = schema.name
    if schema.version is not None:
        node["version"] = schema.version
    if schema.doc is not None:
        node["doc"] = schema.doc
    if schema.parameters is not None:
        node["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        node["default"] = _to_json(schema, schema.default, numeric_decimals)
    return node


def as_connect_schema(node: Any) -> Schema | None:
    """The envelope's JSON schema as a Connect schema (Kafka's JsonConverter.asConnectSchema)."""
    if node is None:
        return None
    if not isinstance(node, dict):
        raise DataException("Schema must contain 'type' field")
    type_name = node.get("type")
    if not isinstance(type_name, str):
        raise DataException("Schema must contain 'type' field")
    schema_type = _TYPES_BY_NAME.get(type_name)
    if schema_type is None:
        raise DataException("Unknown schema type: " + type_name)
    builder: SchemaBuilder
    if schema_type is Type.ARRAY:
        if node.get("items") is None:
            raise DataException("Array schema did not specify the element type")
        builder = SchemaBuilder.array(_required(as_connect_schema(node["items"])))
    elif schema_type is Type.MAP:
        if node.get("keys") is None:
            raise DataException("Map schema did not specify the key type")
        if node.get("values") is None:
            raise DataException("Map schema did not specify the value type")
        builder = SchemaBuilder.map(_required(as_connect_schema(node["keys"])),
                                    _required(as_connect_schema(node["values"])))
    elif schema_type is Type.STRUCT:
        builder = SchemaBuilder.struct()
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise DataException("Struct schema's \"fields\" argument is not an array.")
        for field in fields:
            name = field.get("field") if isinstance(field, dict) else None
            if not isinstance(name, str):
                raise DataException("Struct schema's field name not specified properly")
            builder.field(name, _required(as_connect_schema(field)))
    else:
        builder = SchemaBuilder(schema_type)
    if node.get("optional") is True:
        builder.optional()
    else:
        builder.required()
    if isinstance(node.get("name"), str):
        builder.name(node["name"])
    version = node.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        builder.version(version)
    if isinstance(node.get("doc"), str):
        builder.doc(node["doc"])
    params = node.get("parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise DataException("Schema parameters must be a JSON object.")
        for key, value in params.items():
            if not isinstance(value, str):
                raise DataException("Schema parameters must have string values.")
            builder.parameter(key, value)
    if "default" in node and node["default"] is not None:
        builder.default_value(_to_connect(builder._peek(), node["default"]))
    return builder.build()


def _required(schema: Schema | None) -> Schema:
    if schema is None:
        raise DataException("Schema must contain 'type' field")
    return schema


# -- Connect -> JSON --------------------------------------------------------------------------
_AS_IS = frozenset({Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.BOOLEAN, Type.STRING})
_FLOATS = frozenset({Type.FLOAT32, Type.FLOAT64})


def _to_json(schema: Schema | None, value: Any, numeric_decimals: bool, checked: bool = False) -> Any:
    """A Connect value as the JSON Kafka writes; ``checked`` when it comes out of a Struct, whose
    puts already validated it (so it is not validated twice)."""
    if value is None:
        if schema is None:
            return None
        if schema.default is not None:
            return _to_json(schema, schema.default, numeric_decimals)
        if schema.optional:
            return None
        raise DataException("Conversion error: null value for field that is required and has no default value")
    if schema is not None and schema.name is not None:
        logical = _logical_to_json(schema, value, numeric_decimals)
        if logical is not _NOT_LOGICAL:
            return logical
    schema_type = schema.type if schema is not None else schema_type_of(value)
    if schema_type is None:
        raise DataException(f"Java class {type(value).__name__} does not have corresponding schema type.")
    try:
        if schema_type in _AS_IS:
            if schema is not None and not checked:
                validate_value(schema, value)
            return value
        if schema_type in _FLOATS:
            if schema is not None and not checked:
                validate_value(schema, value)
            return float(value)
        if schema_type is Type.BYTES:
            if schema is not None and not checked:
                validate_value(schema, value)
            return base64.b64encode(bytes(value)).decode("ascii")
        if schema_type is Type.ARRAY:
            if not isinstance(value, (list, tuple)):
                raise DataException(f"Invalid type for array: {type(value).__name__}")
            element = schema.value_schema if schema is not None else None
            return [_to_json(element, item, numeric_decimals, checked) for item in value]
        if schema_type is Type.MAP:
            if not isinstance(value, dict):
                raise DataException(f"Invalid type for map: {type(value).__name__}")
            key_schema = schema.key_schema if schema is not None else None
            value_schema = schema.value_schema if schema is not None else None
            object_mode = (all(isinstance(k, str) for k in value) if schema is None
                           else schema.key_schema.type is Type.STRING)
            if object_mode:
                return {str(k): _to_json(value_schema, v, numeric_decimals, checked) for k, v in value.items()}
            return [[_to_json(key_schema, k, numeric_decimals, checked),
                     _to_json(value_schema, v, numeric_decimals, checked)] for k, v in value.items()]
        if schema_type is Type.STRUCT:
            if not isinstance(value, Struct):
                raise DataException(f"Invalid type for struct: {type(value).__name__}")
            if schema is not None and value.schema != schema:
                raise DataException("Mismatching schema.")
            return {f.name: _to_json(f.schema, value.get(f), numeric_decimals, True) for f in value.schema.fields}
    except DataException:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise DataException(f"Invalid type for {schema_type}: {type(value).__name__}") from exc
    raise DataException(f"Couldn't convert {value!r} to JSON.")


_NOT_LOGICAL = object()


def _logical_to_json(schema: Schema, value: Any, numeric_decimals: bool) -> Any:
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        if not isinstance(value, decimal.Decimal):
            raise DataException("Invalid type for Decimal, expected BigDecimal but was " + type(value).__name__)
        if numeric_decimals:
            return _Number(value)
        return base64.b64encode(Decimal.from_logical(schema, value)).decode("ascii")
    if name == Date.LOGICAL_NAME:
        if not isinstance(value, _dt.date):
            raise DataException("Invalid type for Date, expected Date but was " + type(value).__name__)
        return Date.from_logical(schema, value)
    if name == Time.LOGICAL_NAME:
        if not isinstance(value, _dt.time):
            raise DataException("Invalid type for Time, expected Date but was " + type(value).__name__)
        return Time.from_logical(schema, value)
    if name == Timestamp.LOGICAL_NAME:
        if not isinstance(value, _dt.datetime):
            raise DataException("Invalid type for Timestamp, expected Date but was " + type(value).__name__)
        return Timestamp.from_logical(schema, value)
    return _NOT_LOGICAL


# -- JSON -> Connect --------------------------------------------------------------------------
def _node_type(node: Any) -> str:
    """Jackson's JsonNodeType name of a parsed JSON value (for error messages)."""
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, (int, float, decimal.Decimal)):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    return "OBJECT"


def _is_integral(node: Any) -> bool:
    return isinstance(node, int) and not isinstance(node, bool)


def _to_connect(schema: Schema | None, node: Any) -> Any:
    if schema is None:
        if node is None:
            return None
        if isinstance(node, decimal.Decimal):
            return float(node)
        if isinstance(node, list):
            return [_to_connect(None, item) for item in node]
        if isinstance(node, dict):
            return {k: _to_connect(None, v) for k, v in node.items()}
        return node
    if node is None:
        if schema.default is not None:
            return schema.default
        if schema.optional:
            return None
        raise DataException(f"Invalid null value for required {schema.type} field")
    if schema.name is not None:
        logical = _logical_to_connect(schema, node)
        if logical is not _NOT_LOGICAL:
            return logical
    t = schema.type
    if t is Type.BOOLEAN:
        if not isinstance(node, bool):
            raise DataException(f"Invalid value for BOOLEAN field: {_node_type(node)}")
        return node
    if t.is_integer:
        if not _is_integral(node):
            raise DataException(f"Invalid value for {t} field: {_node_type(node)}")
        validate_value(schema, node)
        return node
    if t in (Type.FLOAT32, Type.FLOAT64):
        if not isinstance(node, (int, float, decimal.Decimal)) or isinstance(node, bool):
            raise DataException(f"Invalid value for {t} field: {_node_type(node)}")
        return float(node)
    if t is Type.STRING:
        if not isinstance(node, str):
            raise DataException(f"Invalid value for STRING field: {_node_type(node)}")
        return node
    if t is Type.BYTES:
        return _binary(node)
    if t is Type.ARRAY:
        if not isinstance(node, list):
            raise DataException(f"Arrays should be encoded as JSON arrays, but found {_node_type(node)}")
        return [_to_connect(schema.value_schema, item) for item in node]
    if t is Type.MAP:
        key_schema, value_schema = schema.key_schema, schema.value_schema
        if key_schema.type is Type.STRING:
            if not isinstance(node, dict):
                raise DataException("Maps with string fields should be encoded as JSON objects, but found "
                                    + _node_type(node))
            return {k: _to_connect(value_schema, v) for k, v in node.items()}
        if not isinstance(node, list):
            raise DataException("Maps with non-string fields should be encoded as JSON array of tuples, but found "
                                + _node_type(node))
        result: dict[Any, Any] = {}
        for entry in node:
            if not isinstance(entry, list):
                raise DataException("Found invalid map entry instead of array tuple: " + _node_type(entry))
            if len(entry) != 2:
                raise DataException(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
            result[_hashable(_to_connect(key_schema, entry[0]))] = _to_connect(value_schema, entry[1])
        return result
    if not isinstance(node, dict):
        raise DataException("Structs should be encoded as JSON objects, but found " + _node_type(node))
    # each value was checked against its field's schema as it was read
    return Struct.from_checked(schema, [_to_connect(f.schema, node.get(f.name)) for f in schema.fields])


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    if isinstance(key, dict):
        raise DataException("Map keys of type map are not supported")
    return key


def _binary(node: Any) -> bytes:
    if not isinstance(node, str):
        raise DataException("Invalid bytes field")
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError):
        raise DataException("Invalid bytes field") from None


def _logical_to_connect(schema: Schema, node: Any) -> Any:
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        if isinstance(node, (int, decimal.Decimal)) and not isinstance(node, bool):
            return decimal.Decimal(node)
        if isinstance(node, float):
            return decimal.Decimal(repr(node))
        if isinstance(node, str):
            return Decimal.to_logical(schema, _binary(node))
        raise DataException("Invalid type for Decimal, underlying representation should be numeric or bytes but "
                            "was " + _node_type(node))
    if name == Date.LOGICAL_NAME:
        if not _is_integral(node):
            raise DataException("Invalid type for Date, underlying representation should be integer but was "
                                + _node_type(node))
        return Date.to_logical(schema, node)
    if name == Time.LOGICAL_NAME:
        if not _is_integral(node):
            raise DataException("Invalid type for Time, underlying representation should be integer but was "
                                + _node_type(node))
        return Time.to_logical(schema, node)
    if name == Timestamp.LOGICAL_NAME:
        if not _is_integral(node):
            raise DataException("Invalid type for Timestamp, underlying representation should be integral but "
                                "was " + _node_type(node))
        return Timestamp.to_logical(schema, node)
    return _NOT_LOGICAL


class JsonConverter:
    """Kafka's org.apache.kafka.connect.json.JsonConverter (a Converter and a HeaderConverter)."""

    def __init__(self) -> None:
        self.schemas_enabled = True
        self.numeric_decimals = False
        self.cache_size = 1000
        self._schema_cache: OrderedDict[str, Schema | None] = OrderedDict()
        #: Connect schema -> its envelope JSON text (Kafka's fromConnectSchemaCache)
        self._json_schema_cache: dict[Schema, bytes] = {}
        #: the envelope prefix (``{"schema":<text>,"payload":``) last read, and its schema: records of
        #: a topic share one schema, so its text is recognised instead of parsed again
        self._last_prefix: bytes | None = None
        self._last_schema: Schema | None = None
        self.is_key = False

    def config(self) -> ConfigDef:
        return json_converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool | None = None) -> None:
        settings = dict(configs)
        if is_key is not None:
            settings.setdefault(CONVERTER_TYPE_CONFIG, ConverterType.KEY if is_key else ConverterType.VALUE)
        parsed = AbstractConfig(json_converter_config_def(), settings)
        self.schemas_enabled = bool(parsed.get(SCHEMAS_ENABLE_CONFIG))
        self.cache_size = int(parsed.get(SCHEMAS_CACHE_SIZE_CONFIG))
        self.numeric_decimals = str(parsed.get(DECIMAL_FORMAT_CONFIG)).upper() == "NUMERIC"
        self.is_key = parsed.get(CONVERTER_TYPE_CONFIG) == ConverterType.KEY

    def close(self) -> None:
        self._schema_cache.clear()
        self._json_schema_cache.clear()

    # -- Converter ---------------------------------------------------------------------------
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: ConnectHeaders | None = None) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = _to_json(schema, value, self.numeric_decimals)
        try:
            payload_json = _dumps(payload)
            if not self.schemas_enabled:
                return payload_json
            # the envelope as json.dumps would write it, with the schema's text computed once per schema
            return b'{"schema":' + self._schema_json(schema) + b',"payload":' + payload_json + b"}"
        except (TypeError, ValueError) as exc:
            raise DataException(f"Converting Kafka Connect data to byte[] failed due to serialization error: "
                                f"{exc}") from exc

    def _schema_json(self, schema: Schema | None) -> bytes:
        if schema is None:
            return b"null"
        cached = self._json_schema_cache.get(schema)
        if cached is None:
            cached = _dumps(as_json_schema(schema, self.numeric_decimals))
            if len(self._json_schema_cache) >= max(self.cache_size, 1):
                self._json_schema_cache.clear()
            self._json_schema_cache[schema] = cached
        return cached

    def to_connect_data(self, topic: str, data: bytes | None,
                        headers: ConnectHeaders | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        raw = bytes(data)
        prefix = self._last_prefix
        if self.schemas_enabled and prefix is not None and raw.startswith(prefix) and raw.endswith(b"}"):
            try:
                payload = _DECODER.decode(raw[len(prefix):-1].decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                pass  # not a whole JSON value between the prefix and the closing brace: the full path decides
            else:
                return SchemaAndValue(self._last_schema, _to_connect(self._last_schema, payload))
        try:
            node = _DECODER.decode(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error: "
                                f"{exc}") from exc
        if self.schemas_enabled:
            if not isinstance(node, dict) or len(node) != 2 or "schema" not in node or "payload" not in node:
                raise DataException(
                    "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not "
                    "contain additional fields. If you are trying to deserialize plain JSON data, set "
                    "schemas.enable=false in your converter configuration.")
            schema = self._connect_schema(node["schema"])
            value = _to_connect(schema, node["payload"])
            self._remember_prefix(raw, schema)
            return SchemaAndValue(schema, value)
        return SchemaAndValue(None, _to_connect(None, node))

    def _remember_prefix(self, raw: bytes, schema: Schema | None) -> None:
        """Keep ``{"schema":<text>,"payload":`` of an envelope whose schema text ends where the
        payload key starts, so the next record with the same schema text skips parsing it."""
        head = b'{"schema":'
        if not raw.startswith(head):
            return
        try:
            _, end = _DECODER.raw_decode(raw.decode("utf-8"), len(head))
        except (UnicodeDecodeError, ValueError):
            return
        text = raw.decode("utf-8")
        if text.startswith(',"payload":', end):
            self._last_prefix = text[:end + len(',"payload":')].encode("utf-8")
            self._last_schema = schema

    def _connect_schema(self, node: Any) -> Schema | None:
        if node is None:
            return None
        key = repr(node)  # same text, same parsed dict in the same order: a cheap exact key
        if key in self._schema_cache:
            self._schema_cache.move_to_end(key)
            return self._schema_cache[key]
        schema = as_connect_schema(node)
        if self.cache_size > 0:
            self._schema_cache[key] = schema
            while len(self._schema_cache) > self.cache_size:
                self._schema_cache.popitem(last=False)
        return schema

    # -- HeaderConverter ---------------------------------------------------------------------
    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)
