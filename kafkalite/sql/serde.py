"""A row as a source's record bytes (ksqlDB's ``InsertValuesExecutor``): the values of ``INSERT
INTO ... VALUES`` checked against the columns' types, then encoded per the source's
``KEY_FORMAT``/``VALUE_FORMAT`` exactly as the engine's queries decode them (KAFKA as Kafka's
serializers write it: INT/BIGINT/DOUBLE binary, STRING text; JSON as an object with the column
names, DELIMITED comma-separated, AVRO framed with the registry's latest ``<topic>-value`` schema,
an AVRO key with ``<topic>-key``'s: ``avro_keys``). Pure apart from the registry lookup it is
handed.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from kafkalite.sql import ast, kafka_format, values
from kafkalite.sql.errors import BAD_REQUEST, KsqlError
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.translate import map_entry_fields

#: (schema id, parsed schema, field names) of a subject's latest Avro schema
AvroLookup = Callable[[str], tuple[int, Any, list[str]]]


@dataclass(frozen=True)
class EncodedRecord:
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def row_of(s: ast.InsertValues, source: DataSource, text: str) -> tuple[dict[str, Any], int | None]:
    """The statement's values by column name (typed), and ROWTIME if it was given (ksqlDB's
    ``GenericRecordFactory``): every column checked first, then each value evaluated as a
    constant expression (``values``) and coerced strictly to its column's type. Errors are
    ksqlDB's, prefixed with "Failed to insert values into '<target>'." as its executor words them."""
    names = list(s.columns) or [c.name for c in source.columns]
    if len(names) != len(s.values):
        raise values.refuse(f"Expected a value for each column. Expected Columns: [{', '.join(names)}]. "
                            f"Got [{', '.join(_text(v) for v in s.values)}]", source.name, text)
    for name in names:
        if name in ("ROWPARTITION", "ROWOFFSET"):
            raise values.refuse(f"Inserting into column `{name}` is not allowed.", source.name, text)
        if name != "ROWTIME" and source.column(name) is None:
            raise values.refuse(f"Column name `{name}` does not exist.", source.name, text)
    row: dict[str, Any] = {}
    rowtime: int | None = None
    for name, expr in zip(names, s.values):
        try:
            value = values.constant(expr)
            if name == "ROWTIME":
                rowtime = values.column_value(value, ast.SqlType("BIGINT"), name)
            else:
                column = source.column(name)
                assert column is not None
                row[name] = values.column_value(value, column.type, name)
        except values.EvaluationError as exc:
            raise values.refuse(str(exc), source.name, text) from None
    if source.kind == "TABLE":
        missing = [c.name for c in source.key_columns if row.get(c.name) is None]
        if missing:
            raise values.refuse(f"Value for primary key column(s) {', '.join(missing)} is required for tables",
                                source.name, text)
    return row, rowtime


def identifier(text: str) -> str:
    """A name as a client spells it over the API (ksqlDB's ``Identifiers.getIdentifierText``):
    upper-cased unless quoted with backticks or double quotes (a doubled quote escapes one)."""
    if not text or text[0] not in "`\"":
        return text.upper()
    quote = text[0]
    if len(text) < 2 or text[-1] != quote:
        raise ValueError("Expected matching quote at end of value")
    inner = text[1:-1]
    if inner.replace(quote * 2, "").count(quote):
        raise ValueError(f"Un-escaped quote in middle of value at index {inner.replace(quote * 2, '  ').index(quote) + 1}")
    return inner.replace(quote * 2, quote)


def record_field(record: dict[Any, Any], name: str) -> Any:
    """A column's field in a decoded JSON object or Avro record, matched as ksqlDB's deserializers
    match it: the field named as written, else the one whose upper-cased name is the column's
    (a topic written by hand has ``name`` where the column is ``NAME``; of several, the last, as
    ksqlDB's map of upper-cased names keeps it); None when there is none. The one rule for every
    Python decoder of records (a table's output read back, an AVRO key's columns)."""
    return record_fields(record, (name,))[name]


def record_fields(record: dict[Any, Any], names: Iterable[str]) -> dict[str, Any]:
    """:func:`record_field` for several columns of one record: the upper-cased names are indexed
    once per record, and only when a column is not spelled as written (a decoder reads every
    column of every record; scanning the fields per column would cost columns x fields)."""
    out: dict[str, Any] = {}
    upper: dict[str, Any] | None = None
    for name in names:
        if name in record:
            out[name] = record[name]
            continue
        if upper is None:
            upper = {str(k).upper(): v for k, v in record.items()}      # of several, the last stays
        out[name] = upper.get(name.upper())
    return out


def row_from_json(obj: dict[str, Any], source: DataSource) -> dict[str, Any]:
    """One ``/inserts-stream`` row by column name (ksqlDB's ``KeyValueExtractor`` with its
    ``ApiSqlValueCoercer``): field names case-insensitive unless quoted, every key column
    required (streams too), missing value columns null, unknown fields ignored, values coerced
    strictly (no text to number); errors are ksqlDB's, code 40000."""
    fields: dict[str, Any] = {}
    for name, value in obj.items():
        try:
            column = identifier(name)
        except ValueError as exc:
            raise KsqlError(f"Invalid column / struct field name. Name: {name}. Reason: {exc}.",
                            code=BAD_REQUEST) from None
        if column in fields:
            raise KsqlError(f"Found duplicate column / struct field name: {column}", code=BAD_REQUEST)
        fields[column] = value
    row: dict[str, Any] = {}
    for c in source.key_columns:
        if fields.get(c.name) is None:
            raise KsqlError(f"Key field must be specified: {c.name}", code=BAD_REQUEST)
        row[c.name] = _api_coerce(fields[c.name], c.type)
    for c in source.value_columns:
        value = fields.get(c.name)
        if c.type.name == "BYTES" and isinstance(value, str):     # JSON carries bytes as base64
            try:
                value = base64.b64decode(value, validate=True)
            except binascii.Error:
                raise KsqlError(f"Can't coerce a field of type {_java_class(value)} into type BYTES",
                                code=BAD_REQUEST) from None
        row[c.name] = None if value is None else _api_coerce(value, c.type)
    return row


#: a type as ksqlDB prints it in messages (``INTEGER``, ``ARRAY<INTEGER>``, ``DECIMAL(4, 2)``)
ksql_type_name = values.ksql_type_name


def _java_class(v: Any) -> str:
    """The class Vert.x's JSON decoder gives a value, as ksqlDB names it in its coercion error."""
    if isinstance(v, bool):
        return "class java.lang.Boolean"
    if isinstance(v, int):
        return "class java.lang.Integer" if -2**31 <= v < 2**31 else "class java.lang.Long"
    return {float: "class java.lang.Double", str: "class java.lang.String", dict: "class io.vertx.core.json.JsonObject",
            list: "class io.vertx.core.json.JsonArray", bytes: "class java.nio.HeapByteBuffer"}.get(
        type(v), f"class {type(v).__name__}")


class _NoCoercion(Exception):
    pass


def _api_coerce(value: Any, t: ast.SqlType) -> Any:
    try:
        return _coerce_json(value, t)
    except _NoCoercion:
        raise KsqlError(f"Can't coerce a field of type {_java_class(value)} into type {ksql_type_name(t)}",
                        code=BAD_REQUEST) from None


def _coerce_json(v: Any, t: ast.SqlType) -> Any:
    """ksqlDB's strict coercion of a decoded JSON value to a column type; the result is what
    ``encode`` takes (TIMESTAMP as epoch ms, DATE/TIME as their ISO text, DECIMAL a Decimal)."""
    if v is None:
        return None
    name = t.name
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    if name == "DECIMAL":
        if not (number or isinstance(v, str)):
            raise _NoCoercion
        try:
            d = decimal.Decimal(str(v)).quantize(decimal.Decimal(1).scaleb(-t.params[1]), decimal.ROUND_HALF_UP)
        except decimal.InvalidOperation:
            raise _NoCoercion from None
        if len(d.as_tuple().digits) > t.params[0] and d != 0:
            raise _NoCoercion
        return d
    if name == "ARRAY":
        if not isinstance(v, list):
            raise _NoCoercion
        return [_coerce_json(x, t.items[0]) for x in v]
    if name == "MAP":
        if not isinstance(v, dict):
            raise _NoCoercion
        return {_coerce_json(k, t.items[0]): _coerce_json(x, t.items[1]) for k, x in v.items()}
    if name == "STRUCT":
        if not isinstance(v, dict):
            raise _NoCoercion
        try:
            given = {identifier(k): x for k, x in v.items()}
        except ValueError:
            raise _NoCoercion from None
        declared = dict(t.fields)
        if any(k not in declared for k in given):
            raise _NoCoercion                              # a field the struct does not have
        return {n: _coerce_json(given.get(n), ft) for n, ft in t.fields}
    if name == "BOOLEAN" and isinstance(v, bool):
        return v
    if name == "INT" and number and isinstance(v, int) and -2**31 <= v < 2**31:
        return v
    if name == "BIGINT" and number and isinstance(v, int):
        return v
    if name == "DOUBLE" and number:
        return float(v)
    if name in ("STRING", "VARCHAR") and isinstance(v, str):
        return v
    if name == "BYTES" and isinstance(v, bytes):
        return v
    if isinstance(v, str) and name in ("TIMESTAMP", "DATE", "TIME"):
        parsed = parse_temporal(v, name)
        if parsed is None:
            raise _NoCoercion
        return parsed
    raise _NoCoercion


def parse_temporal(text: str, type_name: str) -> Any:
    """ksqlDB's text forms (``SqlTimeTypes``): TIMESTAMP ``yyyy-MM-ddTHH:mm:ss[.S]`` (UTC; a date
    alone is midnight) as epoch ms; DATE ``yyyy-MM-dd`` and TIME ``HH:mm:ss[.S]`` checked and kept
    as text. None if it does not parse."""
    try:
        if type_name == "TIMESTAMP":
            ts = datetime.datetime.fromisoformat(text.strip())
            if ts.tzinfo is None:
                ts = ts.replace(tzinfo=datetime.timezone.utc)
            return int(ts.timestamp() * 1000)
        if type_name == "DATE":
            return datetime.date.fromisoformat(text.strip()).isoformat()
        return datetime.time.fromisoformat(text.strip()).isoformat()
    except ValueError:
        return None


def encode(source: DataSource, row: dict[str, Any], rowtime: int | None, avro: AvroLookup | None,
           text: str) -> EncodedRecord:
    keys, values = source.key_columns, source.value_columns
    key: bytes | None = None
    if keys:
        if source.key_format == "AVRO":
            key = _avro_key(source, row, avro, text)
        elif source.key_format == "JSON" and len(keys) == 1:     # unwrapped, as ksqlDB's UNWRAP_SINGLES
            v = row.get(keys[0].name)
            key = None if v is None else _compact(_json(_time_ms(v, keys[0])))
        elif source.key_format == "JSON":
            key = _compact({c.name: _json(row.get(c.name)) for c in keys})
        elif row.get(keys[0].name) is not None and source.key_format == "KAFKA":
            key = kafka_format.encode(row[keys[0].name], keys[0].type)
        elif row.get(keys[0].name) is not None:
            key = _plain(row[keys[0].name]).encode()
    value: bytes | None
    fmt = source.value_format
    if fmt == "JSON":
        value = _compact({c.name: _json(_time_ms(row.get(c.name), c)) for c in values})
    elif fmt == "DELIMITED":
        value = source.value_delimiter.join("" if row.get(c.name) is None else _plain(_time_ms(row[c.name], c))
                                            for c in values).encode()
    elif fmt == "KAFKA":
        v = row.get(values[0].name) if len(values) == 1 else None
        value = None if v is None else kafka_format.encode(v, values[0].type)
    else:
        if avro is None:
            raise KsqlError("Schema registry url is not set (ksql.schema.registry.url)", statement=text)
        from kafkalite.registry import serde

        schema_id, parsed, fields = avro(f"{source.topic}-value")
        named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
        by_upper = {f["name"].upper(): f for f in (parsed.get("fields", []) if isinstance(parsed, dict) else [])}
        by_upper.update({f.upper(): {"name": f, "type": None} for f in fields if f.upper() not in by_upper})
        try:
            datum = {}
            for c in values:
                f = by_upper.get(c.name) or by_upper.get(c.name.upper(), {"name": c.name, "type": None})
                datum[f["name"]] = avro_value(row.get(c.name), c.type, f["type"], named, c.name)
        except ValueError as exc:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None
        try:
            value = serde.encode(schema_id, parsed, datum)
        except serde.SerdeError as exc:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None
    ts = rowtime
    if ts is None and source.timestamp and isinstance(row.get(source.timestamp), int):
        ts = row[source.timestamp]                       # the TIMESTAMP column is the record's time
    return EncodedRecord(key, value, ts if ts is not None else int(time.time() * 1000))


def _avro_key(source: DataSource, row: dict[str, Any], avro: AvroLookup | None, text: str) -> bytes | None:
    """The row's AVRO key (``avro_keys``), refused in the statement's words."""
    from kafkalite.sql import avro_keys

    if avro is None:
        raise KsqlError("Schema registry url is not set (ksql.schema.registry.url)", statement=text)
    try:
        return avro_keys.encode(source, row, avro)
    except ValueError as exc:
        raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None


def format_refusal(columns: "tuple[ast.ColumnDef, ...] | list[ast.ColumnDef]", key_format: str,
                   value_format: str) -> str | None:
    """ksqlDB's refusal of a column type its format cannot carry, None if all fit: DELIMITED and
    KAFKA take no ARRAY, MAP or STRUCT (``KsqlDelimitedDeserializer``, ``KafkaSerdeFactory``); AVRO
    and JSON maps must have STRING keys (``AvroUtil``, ``KsqlJsonSerdeFactory``), also nested; no
    key column holds a MAP (:func:`key_refusal`)."""
    def maps(t: ast.SqlType) -> list[ast.SqlType]:
        inner = [x for i in t.items for x in maps(i)] + [x for _, f in t.fields for x in maps(f)]
        return ([t] if t.name == "MAP" else []) + inner
    for c in columns:
        fmt = key_format if c.key else value_format
        if c.type.name in ("ARRAY", "MAP", "STRUCT") and fmt in ("DELIMITED", "KAFKA"):
            return (f"The '{fmt}' format does not support type '{c.type.name}'"
                    + (f", column: `{c.name}`" if fmt == "DELIMITED" else ""))
        refused = key_refusal([c]) if c.key else None
        if refused is not None:
            return refused
        if any(m.items[0].name not in ("STRING", "VARCHAR") for m in maps(c.type)):
            if fmt == "AVRO":
                return "Avro only supports MAPs with STRING keys"
            if fmt == "JSON":
                return "JSON only supports MAP types with STRING keys"
    return None


#: Avro's primitive types as ksqlDB maps them (Confluent's AvroData to Connect, then ksqlDB's
#: ConnectKsqlSchemaTranslator): both integer sizes below 64 bits are INT, both floats DOUBLE
_AVRO_TYPES = {"string": "STRING", "long": "BIGINT", "int": "INT", "double": "DOUBLE", "float": "DOUBLE",
               "boolean": "BOOLEAN", "bytes": "BYTES"}
#: the logical types Connect knows (AvroData): ksqlDB reads them as its temporal types; others
#: (timestamp-micros, local-timestamp-*, uuid...) stay their plain type, as Connect leaves them
_AVRO_LOGICAL: dict[tuple[Any, Any], str] = {("long", "timestamp-millis"): "TIMESTAMP", ("int", "date"): "DATE", ("int", "time-millis"): "TIME"}


def avro_sql_type(t: Any, original_names: bool = False) -> ast.SqlType | None:
    """A registry field's Avro type as a ksqlDB column type (an optional field's union is its
    non-null branch); None if ksqlDB-on-Spark has no column type for it. A record's fields are
    upper-cased, as ksqlDB names them, or kept as spelled with ``original_names`` (ksqlDB's
    ``ORIGINAL_FIELD_NAME`` policy, for a schema named by its id)."""
    if isinstance(t, list):
        branches = [x for x in t if x != "null"]
        return avro_sql_type(branches[0], original_names) if len(branches) == 1 else None
    if isinstance(t, str):
        return ast.SqlType(_AVRO_TYPES[t]) if t in _AVRO_TYPES else None
    if not isinstance(t, dict):
        return None
    base, logical = t.get("type"), t.get("logicalType")
    if logical == "decimal" and base in ("bytes", "fixed") and "precision" in t:
        return ast.SqlType("DECIMAL", (int(t["precision"]), int(t.get("scale", 0))))
    if (base, logical) in _AVRO_LOGICAL:
        return ast.SqlType(_AVRO_LOGICAL[(base, logical)])
    if base == "array" and map_entry_fields(t.get("items")) is not None:
        key, value = map_entry_fields(t.get("items")) or ({}, {})
        key_type = avro_sql_type(key.get("type"), original_names)
        value_type = avro_sql_type(value.get("type"), original_names)
        if key_type is None or key_type.name not in ("INT", "BIGINT", "BOOLEAN", "STRING") or value_type is None:
            return None                                   # ksqlDB: "Unsupported type for map key"
        return ast.SqlType("MAP", items=(ast.SqlType("STRING"), value_type))
    if base == "array":
        items = avro_sql_type(t.get("items"), original_names)
        return None if items is None else ast.SqlType("ARRAY", items=(items,))
    if base == "map":
        values = avro_sql_type(t.get("values"), original_names)
        return None if values is None else ast.SqlType("MAP", items=(ast.SqlType("STRING"), values))
    if base == "record":
        fields = [(str(f["name"]) if original_names else str(f["name"]).upper(), avro_sql_type(f["type"], original_names))
                  for f in t.get("fields", [])]
        return None if any(ft is None for _, ft in fields) else ast.SqlType(
            "STRUCT", fields=tuple((n, ft) for n, ft in fields if ft is not None))
    return avro_sql_type(base, original_names) if isinstance(base, str) else None


def key_refusal(keys: "Sequence[ast.ColumnDef]") -> str | None:
    """ksqlDB's refusal of a key column holding a MAP (any key format: a map's serialized order
    is not stable, so equal keys could differ in bytes), None if the keys are fine."""
    def has_map(t: ast.SqlType) -> bool:
        return t.name == "MAP" or any(has_map(i) for i in t.items) or any(has_map(f) for _, f in t.fields)
    for k in keys:
        if has_map(k.type):
            return ("Map keys, including types that contain maps, are not supported as they may lead to unexpected "
                    f"behavior due to inconsistent serialization. Key column name: `{k.name}`. Column type: "
                    f"{ksql_type_name(k.type)}. See https://github.com/confluentinc/ksql/issues/6621 for more.")
    return None


AVRO_NAMESPACE = "io.confluent.ksql.avro_schemas"
AVRO_RECORD = "KsqlDataSourceSchema"
_AVRO_PLAIN: dict[str, Any] = {
    "BOOLEAN": "boolean", "INT": "int", "BIGINT": "long", "DOUBLE": "double", "STRING": "string", "BYTES": "bytes",
    "TIMESTAMP": {"type": "long", "logicalType": "timestamp-millis"}, "DATE": {"type": "int", "logicalType": "date"},
    "TIME": {"type": "int", "logicalType": "time-millis"}}


def split_full_name(full_name: str) -> tuple[str, str]:
    """An Avro full name as (namespace, name): ``a.b.C`` -> (``a.b``, ``C``); no dot, no namespace."""
    namespace, _, name = full_name.rpartition(".")
    return namespace, name


def value_avro_schema(columns: tuple[ast.ColumnDef, ...] | list[ast.ColumnDef], full_name: str | None = None) -> str:
    """The Avro schema ksqlDB registers for a source's declared value columns (its
    ``SchemaRegisterInjector`` through Connect's AvroData): a ``KsqlDataSourceSchema`` record in
    ``io.confluent.ksql.avro_schemas`` whose fields, array items, map values and nested struct
    fields are all optional (a union with null, default null); a STRUCT is a record named after
    its path (``KsqlDataSourceSchema_ADDRESS``), a MAP an Avro map (STRING keys only, as Avro
    maps are keyed by text), DECIMAL/TIMESTAMP/DATE/TIME their logical types. ``full_name``
    (``VALUE_SCHEMA_FULL_NAME``) names the record instead, its nested records ``<name>_<COLUMN>``
    in its namespace. ValueError names a type Avro cannot carry."""
    namespace, name = split_full_name(full_name or f"{AVRO_NAMESPACE}.{AVRO_RECORD}")
    fields = [avro_field(c.name, c.type, name) for c in columns if not c.key]
    return json.dumps({"type": "record", "name": name, **({"namespace": namespace} if namespace else {}),
                       "fields": fields})


def avro_field(name: str, t: ast.SqlType, path: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type(t, f"{path}_{name}")], "default": None}


def avro_type(t: ast.SqlType, path: str) -> Any:
    name = "STRING" if t.name == "VARCHAR" else t.name
    if name in _AVRO_PLAIN:
        return _AVRO_PLAIN[name]
    if name == "DECIMAL":
        return {"type": "bytes", "logicalType": "decimal", "precision": t.params[0], "scale": t.params[1]}
    if name == "ARRAY":
        return {"type": "array", "items": ["null", avro_type(t.items[0], path)]}
    if name == "MAP":
        if t.items[0].name not in ("STRING", "VARCHAR"):
            raise ValueError("Avro only supports MAPs with STRING keys")
        return {"type": "map", "values": ["null", avro_type(t.items[1], path)]}
    if name == "STRUCT":
        return {"type": "record", "name": path, "fields": [avro_field(n, ft, path) for n, ft in t.fields]}
    raise ValueError(f"Type {ksql_type_name(t)} cannot be written as AVRO")


def _time_ms(v: Any, column: ast.ColumnDef) -> Any:
    """TIME and DATE as ksqlDB's JSON and DELIMITED formats write them (Connect's Time and Date
    through ``JsonConverter``; ``KsqlDelimitedSerializer.handleTime``/``handleDate``): a TIME as
    milliseconds of the day, a DATE as days since the epoch, also inside an ARRAY, a MAP or a
    STRUCT (a TIMESTAMP is already epoch milliseconds)."""
    return _times(v, column.type)


def _times(v: Any, t: ast.SqlType) -> Any:
    if v is None:
        return None
    if t.name == "ARRAY" and isinstance(v, list):
        return [_times(x, t.items[0]) for x in v]
    if t.name == "MAP" and isinstance(v, dict):
        return {k: _times(x, t.items[1]) for k, x in v.items()}
    if t.name == "STRUCT" and isinstance(v, dict):
        types = dict(t.fields)
        return {k: _times(x, types[k]) if k in types else x for k, x in v.items()}
    if isinstance(v, str) and t.name == "TIME":
        tm = datetime.time.fromisoformat(v)
        return ((tm.hour * 60 + tm.minute) * 60 + tm.second) * 1000 + tm.microsecond // 1000
    if isinstance(v, str) and t.name == "DATE":
        return (datetime.date.fromisoformat(v) - EPOCH_DAY).days
    return v


EPOCH_DAY = datetime.date(1970, 1, 1)


def avro_value(v: Any, t: ast.SqlType, schema: Any, named: dict[str, Any], where: str) -> Any:
    """A column value as fastavro takes it for the registry's schema (``schema`` the field's
    parsed Avro type, None if unknown): a DATE or TIME literal (ksqlDB's 'yyyy-MM-dd' /
    'HH:mm:ss[.SSS]' text) as Avro's ``date`` / ``time-millis`` logical types take it; ARRAY,
    MAP and STRUCT element by element, a STRUCT's fields named as the schema's record spells
    them (ksqlDB matches them case-insensitively); a TIMESTAMP is already epoch milliseconds."""
    if v is None:
        return None
    if isinstance(schema, list):                          # an optional field: its non-null branch
        branches = [b for b in schema if b != "null"]
        schema = branches[0] if len(branches) == 1 else None
    if isinstance(schema, str):
        schema = named.get(schema)
    kind = schema.get("type") if isinstance(schema, dict) else None
    if t.name == "ARRAY" and isinstance(v, list):
        items = schema.get("items") if kind == "array" else None
        return [avro_value(x, t.items[0], items, named, where) for x in v]
    if t.name == "MAP" and isinstance(v, dict) and kind == "array":
        entry = map_entry_fields(schema.get("items"))
        if entry is not None:                             # Connect's map with non-string keys: its entries
            return [{"key": _map_key(k, entry[0]["type"], where),
                     "value": avro_value(x, t.items[1], entry[1]["type"], named, where)} for k, x in v.items()]
    if t.name == "MAP" and isinstance(v, dict):
        vals = schema.get("values") if kind == "map" else None
        return {k: avro_value(x, t.items[1], vals, named, where) for k, x in v.items()}
    if t.name == "STRUCT" and isinstance(v, dict):
        fields = {f["name"].upper(): f for f in schema.get("fields", [])} if kind == "record" else {}
        types = dict(t.fields)
        out = {}
        for k, x in v.items():
            f = fields.get(k.upper(), {"name": k, "type": None})
            out[f["name"]] = avro_value(x, types[k], f["type"], named, f"{where}->{k}")
        return out
    if isinstance(v, str) and t.name == "DATE":
        try:
            return datetime.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"Invalid DATE for {where}: {v!r} (expected yyyy-MM-dd)") from None
    if isinstance(v, str) and t.name == "TIME":
        try:
            return datetime.time.fromisoformat(v)
        except ValueError:
            raise ValueError(f"Invalid TIME for {where}: {v!r} (expected HH:mm:ss)") from None
    return v


def _map_key(key: str, schema: Any, where: str) -> Any:
    """A MAP column's (STRING) key as the registry's entry key type takes it: int, long or boolean
    from its text, as ksqlDB reads those keys as text."""
    kind = [b for b in schema if b != "null"][0] if isinstance(schema, list) and len(schema) == 2 else schema
    kind = kind.get("type") if isinstance(kind, dict) else kind
    try:
        if kind in ("int", "long"):
            return int(key)
        if kind == "boolean":
            if key.lower() not in ("true", "false"):
                raise ValueError(key)
            return key.lower() == "true"
    except ValueError:
        raise ValueError(f"Invalid map key for {where}: {key!r} is not a {kind}") from None
    return key


def _compact(doc: Any) -> bytes:
    """A JSON key or value as ksqlDB's serializer (Jackson) and Spark's ``to_json`` write it: no
    blanks after ``,`` and ``:``, so that INSERT VALUES and a query's output agree byte for byte."""
    return json.dumps(doc, separators=(",", ":")).encode()


def _json(v: Any) -> Any:
    """A row value as ksqlDB's JSON format writes it (decimals as numbers, bytes as base64)."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v


def _plain(v: Any) -> str:
    """A value as DELIMITED/KAFKA text (booleans as ksqlDB writes them: true, false)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(_json(v))


def _text(e: ast.Expr) -> str:
    return values.sql_text(e)
