"""Confluent's AvroData: Connect schemas and values <-> Avro schemas and datums.

The mapping is Confluent's, so schemas registered by kafkalite's AvroConverter and by Confluent's
Java converter look the same to the registry and to other Avro readers:

- INT8/INT16 are Avro ``int`` with ``"connect.type": "int8"|"int16"``; INT32 ``int``, INT64
  ``long``; optional schemas are unions ``["null", T]`` (``[T, "null"]`` when they have a default);
- a STRUCT is a ``record`` named after the schema (``io.confluent.connect.avro.ConnectDefault``
  when it has no name), a MAP with string keys an Avro ``map``, other maps an array of
  ``io.confluent.connect.avro.MapEntry`` records;
- ``connect.name``, ``connect.version``, ``connect.doc``, ``connect.parameters`` and
  ``connect.default`` carry what Avro has no place for (``connect.meta.data``);
- Decimal is ``bytes`` with ``logicalType: decimal`` (``scale``, ``precision`` from the
  ``connect.decimal.precision`` parameter, 64 by default), Date ``date``, Time ``time-millis``,
  Timestamp ``timestamp-millis``; fastavro reads and writes those as Python's decimal/date/time/
  datetime, which are Connect's own values for them.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any

from ..data import (
    Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type,
)
from ..errors import DataException

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_SCHEMA_NAME = "ConnectDefault"
MAP_ENTRY_NAME = "MapEntry"
CONNECT_NAME = "connect.name"
CONNECT_DOC = "connect.doc"
CONNECT_VERSION = "connect.version"
CONNECT_PARAMETERS = "connect.parameters"
CONNECT_DEFAULT = "connect.default"
CONNECT_TYPE = "connect.type"
PRECISION_PARAM = "connect.decimal.precision"
UNION_NAME = f"{NAMESPACE}.Union"

_PRIMITIVE = {Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float", Type.FLOAT64: "double",
              Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes", Type.INT8: "int", Type.INT16: "int"}


class AvroData:
    """Stateless apart from its options (connect.meta.data) and a counter for unnamed records."""

    def __init__(self, connect_meta_data: bool = True) -> None:
        self.connect_meta_data = connect_meta_data

    # -- Connect -> Avro ---------------------------------------------------------------------
    def from_connect_schema(self, schema: Schema | None) -> Any:
        if schema is None:
            return None
        names: dict[str, int] = {}
        return self._from_schema(schema, names, top=True)

    def _from_schema(self, schema: Schema, names: dict[str, int], top: bool = False) -> Any:
        base = self._base(schema, names)
        if not schema.optional:
            return base
        if schema.default is not None:
            return [base, "null"]
        return ["null", base]

    def _record_name(self, schema: Schema, names: dict[str, int]) -> tuple[str, str | None]:
        if schema.name:
            namespace, _, name = schema.name.rpartition(".")
            return name, namespace or None
        count = names.get(DEFAULT_SCHEMA_NAME, 0) + 1
        names[DEFAULT_SCHEMA_NAME] = count
        return (DEFAULT_SCHEMA_NAME if count == 1 else f"{DEFAULT_SCHEMA_NAME}{count}"), NAMESPACE

    def _base(self, schema: Schema, names: dict[str, int]) -> Any:
        logical = schema.name
        node: dict[str, Any]
        if logical == Decimal.LOGICAL_NAME:
            node = {"type": "bytes", "scale": Decimal.scale(schema),
                    "precision": int((schema.parameters or {}).get(PRECISION_PARAM, "64"))}
        elif schema.type is Type.STRUCT:
            name, namespace = self._record_name(schema, names)
            node = {"type": "record", "name": name}
            if namespace:
                node["namespace"] = namespace
            if schema.doc is not None:
                node["doc"] = schema.doc
            fields = []
            for field in schema.fields:
                entry: dict[str, Any] = {"name": field.name, "type": self._from_schema(field.schema, names)}
                if field.schema.doc is not None:
                    entry["doc"] = field.schema.doc
                if field.schema.default is not None:
                    entry["default"] = self._default_to_avro(field.schema, field.schema.default)
                elif field.schema.optional:
                    entry["default"] = None
                fields.append(entry)
            node["fields"] = fields
        elif schema.type is Type.ARRAY:
            node = {"type": "array", "items": self._from_schema(schema.value_schema, names)}
        elif schema.type is Type.MAP:
            if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
                node = {"type": "map", "values": self._from_schema(schema.value_schema, names)}
            else:
                node = {"type": "array", "items": {
                    "type": "record", "name": MAP_ENTRY_NAME, "namespace": NAMESPACE,
                    "fields": [{"name": "key", "type": self._from_schema(schema.key_schema, names)},
                               {"name": "value", "type": self._from_schema(schema.value_schema, names)}]}}
        else:
            node = {"type": _PRIMITIVE[schema.type]}
            if schema.type in (Type.INT8, Type.INT16):
                node[CONNECT_TYPE] = schema.type.value
        if logical == Date.LOGICAL_NAME:
            node["logicalType"] = "date"
        elif logical == Time.LOGICAL_NAME:
            node["logicalType"] = "time-millis"
        elif logical == Timestamp.LOGICAL_NAME:
            node["logicalType"] = "timestamp-millis"
        elif logical == Decimal.LOGICAL_NAME:
            node["logicalType"] = "decimal"
        if self.connect_meta_data:
            if schema.doc is not None and schema.type is not Type.STRUCT:
                node[CONNECT_DOC] = schema.doc
            if schema.version is not None:
                node[CONNECT_VERSION] = schema.version
            if schema.parameters:
                node[CONNECT_PARAMETERS] = dict(schema.parameters)
            if schema.default is not None:
                node[CONNECT_DEFAULT] = self._default_to_avro(schema, schema.default)
            if schema.name is not None:
                node[CONNECT_NAME] = schema.name
        if len(node) == 1:
            return node["type"]
        return node

    def _default_to_avro(self, schema: Schema, value: Any) -> Any:
        """A default value in Avro's JSON form (bytes as ISO-8859-1 text, as Avro defaults are)."""
        datum = self.from_connect_data(schema, value)
        return _json_default(datum)

    def from_connect_data(self, schema: Schema | None, value: Any) -> Any:
        """A Connect value as the datum fastavro writes for from_connect_schema(schema)."""
        if value is None:
            if schema is not None and schema.default is not None:
                return self.from_connect_data(schema, schema.default)
            if schema is not None and not schema.optional:
                raise DataException("Found null value for non-optional schema")
            return None
        if schema is None:
            raise DataException("Cannot convert a value without a schema to Avro")
        if schema.name in (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
            if schema.name == Timestamp.LOGICAL_NAME and isinstance(value, _dt.datetime) and value.tzinfo is None:
                return value.replace(tzinfo=_dt.timezone.utc)
            return value
        t = schema.type
        if t is Type.STRUCT:
            if not isinstance(value, Struct):
                raise DataException(f"Expected a Struct for {schema}, got {type(value).__name__}")
            return {f.name: self.from_connect_data(f.schema, value.get(f)) for f in schema.fields}
        if t is Type.ARRAY:
            return [self.from_connect_data(schema.value_schema, v) for v in value]
        if t is Type.MAP:
            if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
                return {k: self.from_connect_data(schema.value_schema, v) for k, v in value.items()}
            return [{"key": self.from_connect_data(schema.key_schema, k),
                     "value": self.from_connect_data(schema.value_schema, v)} for k, v in value.items()]
        if t is Type.BYTES:
            return bytes(value)
        if t in (Type.FLOAT32, Type.FLOAT64):
            return float(value)
        return value

    # -- Avro -> Connect ---------------------------------------------------------------------
    def to_connect_schema(self, avro: Any) -> Schema:
        return self._to_schema(avro, optional=False, named={})

    def _to_schema(self, avro: Any, optional: bool, named: dict[str, Any]) -> Schema:
        if isinstance(avro, list):
            branches = [b for b in avro if b != "null"]
            if len(branches) == 1 and len(branches) < len(avro):
                return self._to_schema(branches[0], True, named)
            union = SchemaBuilder.struct().name(UNION_NAME)
            for branch in branches:
                branch_schema = self._to_schema(branch, True, named)
                union.field(_union_field_name(branch), branch_schema)
            if len(branches) < len(avro):
                union.optional()
            return union.build()
        if isinstance(avro, str):
            if avro in named:
                avro = named[avro]
            else:
                avro = {"type": avro}
        avro_type = avro.get("type")
        if isinstance(avro_type, (dict, list)):
            return self._to_schema(avro_type, optional, named)
        logical = avro.get("logicalType")
        builder: SchemaBuilder
        if avro_type in ("bytes", "fixed") and logical == "decimal":
            builder = Decimal.builder(int(avro.get("scale", 0)))
            if "precision" in avro and int(avro["precision"]) != 64:  # Confluent keeps only a non-default one
                builder.parameter(PRECISION_PARAM, str(avro["precision"]))
        elif avro_type == "int" and logical == "date":
            builder = Date.builder()
        elif avro_type == "int" and logical == "time-millis":
            builder = Time.builder()
        elif avro_type == "long" and logical == "timestamp-millis":
            builder = Timestamp.builder()
        elif avro_type == "int":
            builder = SchemaBuilder({"int8": Type.INT8, "int16": Type.INT16}.get(avro.get(CONNECT_TYPE), Type.INT32))
        elif avro_type in ("long", "float", "double", "boolean", "string", "bytes", "fixed", "enum"):
            builder = SchemaBuilder({"long": Type.INT64, "float": Type.FLOAT32, "double": Type.FLOAT64,
                                     "boolean": Type.BOOLEAN, "string": Type.STRING, "bytes": Type.BYTES,
                                     "fixed": Type.BYTES, "enum": Type.STRING}[avro_type])
            if avro_type == "enum":
                builder.name(_full_name(avro))
                for symbol in avro.get("symbols", []):
                    builder.parameter(f"io.confluent.connect.avro.Enum.{symbol}", symbol)
                builder.parameter("io.confluent.connect.avro.Enum", _full_name(avro))
                named[_full_name(avro)] = avro
        elif avro_type == "array":
            items = avro["items"]
            item_record = named.get(items) if isinstance(items, str) else items
            if (isinstance(item_record, dict) and item_record.get("type") == "record"
                    and _full_name(item_record) == f"{NAMESPACE}.{MAP_ENTRY_NAME}"):
                named[_full_name(item_record)] = item_record
                fields = {f["name"]: f["type"] for f in item_record["fields"]}
                builder = SchemaBuilder.map(self._to_schema(fields["key"], False, named),
                                            self._to_schema(fields["value"], False, named))
            else:
                builder = SchemaBuilder.array(self._to_schema(items, False, named))
        elif avro_type == "map":
            builder = SchemaBuilder.map(Schema(Type.STRING), self._to_schema(avro["values"], False, named))
        elif avro_type == "record":
            full = _full_name(avro)
            named[full] = avro
            builder = SchemaBuilder.struct()
            if full != f"{NAMESPACE}.{DEFAULT_SCHEMA_NAME}" and not full.startswith(f"{NAMESPACE}.{DEFAULT_SCHEMA_NAME}"):
                builder.name(full)
            if avro.get("doc") is not None:
                builder.doc(avro["doc"])
            for field in avro.get("fields", []):
                field_schema = self._to_schema(field["type"], False, named)
                builder.field(field["name"], field_schema)
        else:
            raise DataException(f"Unsupported Avro type: {avro_type}")
        connect_name = avro.get(CONNECT_NAME)
        if connect_name and builder.name_ is None:
            builder.name(connect_name)
        if isinstance(avro.get(CONNECT_VERSION), int) and builder.version_ is None:
            builder.version(avro[CONNECT_VERSION])
        if avro.get(CONNECT_DOC) is not None and builder.doc_ is None:
            builder.doc(avro[CONNECT_DOC])
        params = avro.get(CONNECT_PARAMETERS)
        if isinstance(params, dict):
            builder.parameters({k: str(v) for k, v in params.items()})
        if optional:
            builder.optional()
        if CONNECT_DEFAULT in avro:
            peek = builder._peek()
            builder.default_value(self.to_connect_data(peek, _from_json_default(peek, avro[CONNECT_DEFAULT])))
        return builder.build()

    def to_connect_data(self, schema: Schema | None, datum: Any) -> Any:
        """A datum fastavro read as the Connect value of ``schema`` (from to_connect_schema)."""
        if datum is None or schema is None:
            return datum
        if schema.name in (Decimal.LOGICAL_NAME, Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
            if schema.name == Decimal.LOGICAL_NAME and isinstance(datum, (bytes, bytearray)):
                return Decimal.to_logical(schema, bytes(datum))
            if schema.name == Date.LOGICAL_NAME and isinstance(datum, int):
                return Date.to_logical(schema, datum)
            if schema.name == Time.LOGICAL_NAME and isinstance(datum, int):
                return Time.to_logical(schema, datum)
            if schema.name == Timestamp.LOGICAL_NAME and isinstance(datum, int):
                return Timestamp.to_logical(schema, datum)
            return datum
        t = schema.type
        if t is Type.STRUCT:
            if schema.name == UNION_NAME:
                return self._union_value(schema, datum)
            struct = Struct(schema)
            for field in schema.fields:
                struct.put(field, self.to_connect_data(field.schema, datum.get(field.name)))
            return struct
        if t is Type.ARRAY:
            return [self.to_connect_data(schema.value_schema, v) for v in datum]
        if t is Type.MAP:
            if isinstance(datum, list):
                return {_hashable(self.to_connect_data(schema.key_schema, e["key"])):
                        self.to_connect_data(schema.value_schema, e["value"]) for e in datum}
            return {k: self.to_connect_data(schema.value_schema, v) for k, v in datum.items()}
        if t is Type.BYTES:
            return bytes(datum)
        return datum

    def _union_value(self, schema: Schema, datum: Any) -> Struct:
        struct = Struct(schema)
        for field in schema.fields:
            try:
                struct.put(field, self.to_connect_data(field.schema, datum))
                return struct
            except (DataException, AttributeError, TypeError):
                continue
        raise DataException(f"Cannot match the union value {datum!r} to a branch of {schema}")


def _full_name(avro: dict[str, Any]) -> str:
    name = str(avro.get("name", ""))
    namespace = avro.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def _union_field_name(branch: Any) -> str:
    if isinstance(branch, str):
        return branch.rsplit(".", 1)[-1]
    if isinstance(branch, dict):
        return str(branch.get("name") or branch.get("type")).rsplit(".", 1)[-1]
    return "branch"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _json_default(datum: Any) -> Any:
    import decimal as _decimal
    if isinstance(datum, (bytes, bytearray)):
        return bytes(datum).decode("latin-1")
    if isinstance(datum, _decimal.Decimal):
        return str(datum)
    if isinstance(datum, _dt.datetime):
        return Timestamp.from_logical(Timestamp.SCHEMA, datum)
    if isinstance(datum, _dt.date):
        return Date.from_logical(Date.SCHEMA, datum)
    if isinstance(datum, _dt.time):
        return Time.from_logical(Time.SCHEMA, datum)
    if isinstance(datum, dict):
        return {k: _json_default(v) for k, v in datum.items()}
    if isinstance(datum, list):
        return [_json_default(v) for v in datum]
    return datum


def _from_json_default(schema: Schema, node: Any) -> Any:
    """connect.default's JSON back to the datum to_connect_data expects."""
    if node is None:
        return None
    if schema.name == Decimal.LOGICAL_NAME and isinstance(node, str):
        import decimal as _decimal
        try:
            return _decimal.Decimal(node)
        except _decimal.InvalidOperation:
            return node.encode("latin-1")
    if schema.type is Type.BYTES and isinstance(node, str):
        return node.encode("latin-1")
    if schema.type is Type.STRUCT and isinstance(node, dict):
        return {f.name: _from_json_default(f.schema, node.get(f.name)) for f in schema.fields}
    if schema.type is Type.ARRAY and isinstance(node, list):
        return [_from_json_default(schema.value_schema, v) for v in node]
    return node
