"""ksqlDB's deserialization errors: a record whose key or value its format cannot read is a
*poison* record. ksqlDB skips it, writes a ``DESERIALIZATION_ERROR`` message to its processing
log (the ``processing`` logger; ``ProcessingLogMessageSchema``: ``type`` 0 and a
``deserializationError`` with ``target``, ``errorMessage``, ``recordB64``, ``cause``, ``topic``)
and goes on; with ``ksql.fail.on.deserialization.error=true`` the query fails instead.

Here the check of each record is Spark SQL (:func:`error_sql`, :func:`avro_key_error_sql`: the
cause as text, null for a record that reads); the query keeps the records whose cause is null
(:func:`skip_or_fail`) through an Arrow function on the executors, which costs a good batch one
vectorised null check and logs each poison record (its cause, target, partition, offset and, for
a poison record only, its bytes). ``recordB64`` holds the record only with
``ksql.logging.processing.rows.include=true``, as ksqlDB keeps record data out of its log by
default. AVRO values are read by the kafkalite source itself: with its ``mode=DROPMALFORMED`` it
drops and logs (its own logger, with topic, partition, offset and cause) what it cannot decode,
and hands each such record to :func:`log_dropped_avro` (its ``malformedRecordHandler`` option),
which logs it here as a processing-log message.
An AVRO key is decoded by :mod:`kafkalite.sql.avro_keys`'s lenient function (null when it
cannot), checked here.

With ``ksql.logging.processing.topic.auto.create=true`` each message is also produced to the
processing-log topic (:mod:`kafkalite.sql.processing_log`): the Arrow function carries the topic
to the executors' Python workers, which attach the Kafka appender on first use and flush it after
each batch that logged something.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from typing import Any, Callable, Sequence

from kafkalite.sql import ast, processing_log
from kafkalite.sql.translate import spark_type, wire_type

#: ksqlDB's processing logger for a source's deserializer (its log4j name, under ``processing``)
LOGGER = "processing.KsqlTopic.Source.deserializer"
log = logging.getLogger(LOGGER)
#: ProcessingLogMessageSchema.MessageType.DESERIALIZATION_ERROR
DESERIALIZATION_ERROR = 0
#: Kafka's deserializers' words for a record of the wrong size (KAFKA format)
_SIZE = {"INT": ("IntegerDeserializer", 4), "BIGINT": ("LongDeserializer", 8), "DOUBLE": ("Deserializer", 8)}


def message(target: str, topic: str, cause: str, record: bytes | None, include_rows: bool,
            partition: int | None = None, offset: int | None = None) -> dict[str, Any]:
    """The processing log message ksqlDB writes for a deserialization error (with the record's
    partition and offset added where known: ksqlDB's message has no field for them)."""
    error: dict[str, Any] = {
        "target": target,
        "errorMessage": f"Failed to deserialize {target} from topic: {topic}. {cause}",
        "recordB64": base64.b64encode(record).decode() if include_rows and record is not None else None,
        "cause": [cause],
        "topic": topic,
    }
    if partition is not None:
        error["partition"] = partition
    if offset is not None:
        error["offset"] = offset
    return {"type": DESERIALIZATION_ERROR, "deserializationError": error, "recordProcessingError": None,
            "productionError": None}


def log_error(target: str, topic: str, cause: str, record: bytes | None, include_rows: bool,
              partition: int | None = None, offset: int | None = None) -> None:
    """One poison record, logged as ksqlDB's processing log writes it (a JSON message, ERROR; the
    message itself on the record too, for the processing log's Kafka appender)."""
    _configure()
    entry = message(target, topic, cause, record, include_rows, partition, offset)
    log.error(json.dumps(entry), extra={processing_log.STRUCTURED: entry})


def _configure() -> None:
    """On a Spark executor's Python worker nothing configures ``logging``: give the processing
    logger a stderr handler there (its stderr is the executor's, the server's own in local mode),
    so the error is not lost to Python's last-resort handler."""
    root = logging.getLogger()
    if not root.handlers and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_TYPE_NAMES = {"INT": "INTEGER", "VARCHAR": "STRING"}


def type_name(t: ast.SqlType) -> str:
    return _TYPE_NAMES.get(t.name, t.name)


# -- the checks, in Spark SQL -------------------------------------------------------------------
def kafka_error_sql(raw: str, t: ast.SqlType) -> str | None:
    """KAFKA: a binary INT/BIGINT/DOUBLE of the wrong size, in Kafka's deserializers' words."""
    if t.name not in _SIZE:
        return None
    name, width = _SIZE[t.name]
    return f"CASE WHEN length({raw}) != {width} THEN 'Size of data received by {name} is not {width}' END"


def json_error_sql(raw: str, unwrapped: bool, columns: Sequence[ast.ColumnDef] = (), fields: str | None = None) -> str:
    """JSON: a record that is not JSON at all (an unwrapped key: not one JSON value; otherwise not
    a JSON object); a JSON ``null`` is a null row, not an error. Then, with ``fields`` (the key or
    value whose fields :func:`bind_json_fields` bound), in column order, the first field its column
    cannot take (:func:`json_field_error_sql`)."""
    text = f"trim(CAST({raw} AS STRING))"
    if unwrapped:
        parsed = f"from_json(concat('[', {text}, ']'), 'ARRAY<STRING>')"
        bad = f"({parsed} IS NULL OR size({parsed}) != 1)"
    else:
        bad = f"({text} != 'null' AND json_object_keys({text}) IS NULL)"     # keys only: no values built
    checks = [] if fields is None else [
        f"WHEN ({e}) IS NOT NULL THEN {e}" for e in
        (json_field_error_sql(fields, i, c, _column_path(c, unwrapped)) for i, c in enumerate(columns)) if e is not None]
    return f"CASE WHEN {bad} THEN concat('Invalid JSON: ', substring({text}, 1, 100)) {' '.join(checks)} END"


# -- JSON fields read as ksqlDB's KsqlJsonDeserializer reads them -------------------------------
# Spark's from_json reads a field of another JSON type than its column as null. ksqlDB's
# deserializer (with JsonSerdeUtils) coerces some mismatches instead (a number or integral text to
# INT and BIGINT, a number or numeric text to DOUBLE, anything to STRING) and fails the record on
# the rest. Here each field is taken as a VARIANT of the parsed record, whose JSON type Spark
# reports (``schema_of_variant``), all in Spark SQL: no Python runs per record.

#: the top-level column types whose value is coerced here (the others are from_json's, checked)
COERCED = frozenset({"BOOLEAN", "INT", "BIGINT", "DOUBLE", "STRING", "VARCHAR"})
#: Java's Integer.parseInt / Long.parseLong (a sign, then ASCII digits) and Double.parseDouble
#: (after Java's trim; hexadecimal floats are not read)
_INTEGRAL_TEXT = "'^[+-]?[0-9]+$'"
_DOUBLE_TEXT = "'^[+-]?(NaN|Infinity|(([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?[fFdD]?))$'"


def json_field_names(target: str, i: int) -> tuple[str, str]:
    """The columns :func:`bind_json_fields` adds for column ``i`` of the key or value: the field
    (a VARIANT) and its JSON type."""
    return f"`__jf_{target}_{i}`", f"`__jk_{target}_{i}`"


def _read_name(target: str, i: int) -> str:
    """The column :func:`bind_json_fields` reads column ``i`` of the key or value into
    (:func:`_bound_read`)."""
    return f"`__jv_{target}_{i}`"


def _column_path(column: ast.ColumnDef, unwrapped: bool) -> str:
    """The deserializer's path to a column's field (``$.NAME``), ``$`` for an unwrapped key (the
    value itself)."""
    return "$" if unwrapped else "$." + column.name


def _shares_read(t: ast.SqlType) -> bool:
    """Whether a column's read and its check come from one expression (:func:`_struct_read`):
    a STRUCT's, whose field lookups both need."""
    return t.name == "STRUCT" and bool(t.fields)


def _bound_read(target: str, i: int, column: ast.ColumnDef, path_text: str) -> str:
    """Column ``i`` read from its bound field: a STRUCT as its value and its fields' first error
    together (:func:`_struct_read`; null unless the field is an object), any other type as its
    value (:func:`_read`), which its check then names instead of reading the field again."""
    fld = _Field.bound(target, i)
    if _shares_read(column.type):
        return f"CASE WHEN {fld.k} LIKE 'OBJECT%' THEN {_struct_read(fld, column.type, _sql_text(path_text), 0)} END"
    return _read(fld, column.type)


def bind_json_fields(frame: Any, raw: str, target: str, columns: Sequence[ast.ColumnDef],
                     unwrapped: bool = False) -> Any:
    """``frame`` with, for each column of a JSON ``target`` (key or value, in ``raw``), its field
    as a VARIANT (SQL NULL when absent or the record no JSON object; a variant null for JSON
    ``null``; matched by the column's upper- or lower-case name, as the from_json read path
    matches it) and its JSON type (STRING, BOOLEAN, BIGINT, DOUBLE, DECIMAL(p,s), OBJECT<...>,
    ARRAY<...>; NULL when absent or null), then each column read (:func:`_bound_read`). The record
    is parsed once, each field taken and read once: the projections are separate, so Spark keeps
    them computed once for the value and check expressions that name them
    (:func:`json_value_sql`, :func:`json_field_error_sql`; Spark's common-subexpression
    elimination would not share what those compute inside ``transform``'s lambdas).
    An ``unwrapped`` key (a single column, ksqlDB's UNWRAP_SINGLES) is itself its one field."""
    if not columns:
        return frame
    doc = f"`__jdoc_{target}`"
    frame = frame.selectExpr("*", f"try_parse_json(CAST({raw} AS STRING)) AS {doc}")
    fields = []
    for i, c in enumerate(columns):
        f, _ = json_field_names(target, i)
        fields.append(f"{doc} AS {f}" if unwrapped else f"coalesce(try_variant_get({doc}, {_path(c.name)}), "
                      f"try_variant_get({doc}, {_path(c.name.lower())})) AS {f}")
    frame = frame.selectExpr("*", *fields).drop(doc.strip("`"))
    kinds = []
    for i, _c in enumerate(columns):
        f, k = json_field_names(target, i)
        kinds.append(f"CASE WHEN {f} IS NULL OR is_variant_null({f}) THEN NULL ELSE schema_of_variant({f}) END AS {k}")
    frame = frame.selectExpr("*", *kinds)
    return frame.selectExpr("*", *(f"{_bound_read(target, i, c, _column_path(c, unwrapped))} AS {_read_name(target, i)}"
                                   for i, c in enumerate(columns)))


def json_field_columns(target: str, columns: Sequence[ast.ColumnDef]) -> list[str]:
    """The names :func:`bind_json_fields` added (to carry them on, then drop them)."""
    return [n for i in range(len(columns)) for n in (*json_field_names(target, i), _read_name(target, i))]


class _Field:
    """SQL for one JSON value read as a VARIANT: ``f`` the variant, ``k`` its JSON type
    (``schema_of_variant``'s text; NULL when absent or JSON ``null``), ``t`` its text (a string's
    content, a number's digits, an object's or array's JSON)."""

    def __init__(self, f: str, k: str) -> None:
        self.f, self.k = f, k
        self.t = self.get("string")

    @classmethod
    def bound(cls, target: str, i: int) -> "_Field":
        """Column ``i`` of the key or value ``target``, bound by :func:`bind_json_fields`."""
        return cls(*json_field_names(target, i))

    @classmethod
    def of(cls, variant: str) -> "_Field":
        """A value inside a collection (a lambda variable): its JSON type computed where read."""
        return cls(variant, f"(CASE WHEN {variant} IS NULL OR is_variant_null({variant}) THEN NULL "
                            f"ELSE schema_of_variant({variant}) END)")

    def get(self, as_type: str) -> str:
        return f"try_variant_get({self.f}, '$', '{as_type}')"

    @property
    def number(self) -> str:
        return f"({self.k} = 'BIGINT' OR {self.k} = 'DOUBLE' OR {self.k} LIKE 'DECIMAL%')"

    @property
    def node(self) -> str:
        """The Jackson node ksqlDB's message names (its mapper reads fractions as BigDecimal)."""
        k = self.k
        return (f"CASE WHEN {k} = 'STRING' THEN 'TextNode' WHEN {k} = 'BOOLEAN' THEN 'BooleanNode' "
                f"WHEN {k} LIKE 'OBJECT%' THEN 'ObjectNode' WHEN {k} LIKE 'ARRAY%' THEN 'ArrayNode' "
                f"WHEN {k} = 'BIGINT' THEN CASE WHEN {self.get('bigint')} BETWEEN -2147483648 AND 2147483647 "
                f"THEN 'IntNode' ELSE 'LongNode' END WHEN {k} LIKE 'DECIMAL(%,0)' THEN 'BigIntegerNode' "
                f"ELSE 'DecimalNode' END")


def _path(name: str) -> str:
    """A variant path literal naming one object field: ``'$["name"]'``."""
    inner = name.replace("\\", "\\\\").replace('"', '\\"')
    return _sql_text(f'$["{inner}"]')


def _member(variant: str, name: str, depth: int) -> str:
    """The field ``name`` of a struct inside a column, as a VARIANT: matched whatever its case
    (ksqlDB's deserializer looks the field up as written, then among the upper-cased JSON names),
    by its own and lower-case spellings first (two direct lookups), else by scanning the object."""
    e = f"`__m{depth}`"
    spellings = [f"try_variant_get({variant}, {_path(n)})" for n in dict.fromkeys((name, name.lower()))]
    scan = (f"try_element_at(filter(map_entries(try_variant_get({variant}, '$', 'map<string,variant>')), "
            f"{e} -> upper({e}.key) = {_sql_text(name.upper())}), 1).value")
    return f"coalesce({', '.join(spellings)}, {scan})"


def _members(fld: _Field, t: ast.SqlType, depth: int) -> str:
    """A struct's fields as VARIANTs (``f0``, ``f1``...) with their JSON types (``k0``, ``k1``...),
    one array of one struct, so that a lambda over it names each once (Spark SQL has no ``let``:
    repeating the lookup, or ``schema_of_variant``, in every expression that reads a field would
    evaluate it each time). Two steps: the lookups, then the types of what they found."""
    n = f"`__n{depth}`"
    lookups = ", ".join(f"'f{j}', {_member(fld.f, name, depth)}" for j, (name, _) in enumerate(t.fields))
    kinds = ", ".join(f"'f{j}', {n}.`f{j}`, 'k{j}', {_Field.of(f'{n}.`f{j}`').k}" for j in range(len(t.fields)))
    return f"transform(array(named_struct({lookups})), {n} -> named_struct({kinds}))"


def _member_fields(t: ast.SqlType, s: str) -> list[_Field]:
    """The fields of :func:`_members`' struct ``s`` (a lambda variable)."""
    return [_Field(f"{s}.`f{j}`", f"{s}.`k{j}`") for j in range(len(t.fields))]


def _struct_read(fld: _Field, t: ast.SqlType, path: str, depth: int) -> str:
    """A JSON object read as STRUCT ``t`` and checked from one lookup of its fields: a struct of
    ``v``, the value (:func:`_read`'s), and ``e``, the first field it cannot take (the cause
    :func:`_nested_error` gives, with its path: ``path`` is SQL text). Only for an object: the
    caller tests ``fld``'s type. A field that is itself a STRUCT is read so too, once, in a
    step of its own (``p<j>``) whose value and error the struct's two halves both name.

    Not shared: a struct inside an ARRAY or MAP, read element by element by :func:`_read` and
    checked by :func:`_nested_error` in two ``transform`` calls (sharing them would build an array
    of pairs per collection and take it apart twice); and a text number in an INT, BIGINT or
    DOUBLE field, which the check parses again (:func:`_error`): only text values pay that, while a
    step holding every such field's value would cost every record."""
    s, q = f"`__s{depth}`", f"`__q{depth}`"
    fields = _member_fields(t, s)
    paths = [f"concat({path}, {_sql_text('.' + n)})" for n, _ in t.fields]
    nested = [j for j, (_, ft) in enumerate(t.fields) if _shares_read(ft)]
    values, errors = [], []
    for j, ((n, ft), f) in enumerate(zip(t.fields, fields)):
        if j in nested:
            values.append(f"{q}.`p{j}`.v")
            errors.append(_error(f, ft, paths[j], depth + 1, inside=f"{q}.`p{j}`.e"))
        else:
            values.append(_read(f, ft, depth + 1))
            errors.append(_error(f, ft, paths[j], depth + 1))
        values[-1] = f"{_sql_text(n)}, {values[-1]}"
    present = [x for x in errors if x is not None]
    first = "CAST(NULL AS STRING)" if not present else present[0] if len(present) == 1 else f"coalesce({', '.join(present)})"
    body = f"named_struct('v', named_struct({', '.join(values)}), 'e', {first})"
    if nested:
        steps = ", ".join(f"'p{j}', CASE WHEN {fields[j].k} LIKE 'OBJECT%' THEN "
                          f"{_struct_read(fields[j], t.fields[j][1], paths[j], depth + 1)} END" for j in nested)
        body = f"transform(array(named_struct({steps})), {q} -> {body})[0]"
    return f"transform({_members(fld, t, depth)}, {s} -> {body})[0]"


def _read(fld: _Field, t: ast.SqlType, depth: int = 0) -> str:
    """``fld`` read as ``t``'s :func:`wire_type` as ksqlDB's ``KsqlJsonDeserializer`` reads it, at
    any depth: an INT or BIGINT from a number (truncated, a whole number beyond BIGINT's range to its
    low bits, as Jackson's ``intValue``/``asLong``) or integral text; a DOUBLE from a number or
    numeric text; a BOOLEAN from true/false only; a STRING from any JSON value (an object as its
    JSON, an array as ``[a, b]``); DECIMAL from a number or numeric text; BYTES from base64 text;
    DATE/TIME/TIMESTAMP as their text (:func:`from_wire` reads days and epoch milliseconds); arrays,
    maps and structs element by element (a struct's fields matched whatever their case). A value
    its type cannot take is null here, and the record's error in :func:`_error`."""
    name = t.name
    if name == "BOOLEAN":
        return f"CASE WHEN {fld.k} = 'BOOLEAN' THEN {fld.get('boolean')} END"
    if name in ("INT", "BIGINT"):
        # beyond BIGINT (a DECIMAL(p,0) or DOUBLE variant): the integer part's low 64 bits
        whole = (f"CASE WHEN {fld.k} = 'DOUBLE' THEN try_cast({fld.get('double')} AS DECIMAL(38, 0)) "
                 f"ELSE try_cast(regexp_extract({fld.t}, '^-?[0-9]+', 0) AS DECIMAL(38, 0)) END")
        low = f"pmod({whole}, 18446744073709551616)"
        number = (f"coalesce({fld.get('bigint')}, CAST(CASE WHEN {low} >= 9223372036854775808 THEN "
                  f"{low} - 18446744073709551616 ELSE {low} END AS BIGINT))")
        if name == "INT":                             # Jackson's intValue() keeps a long's low 32 bits
            low32 = f"pmod({number}, 4294967296)"
            number = (f"coalesce({fld.get('int')}, CAST(CASE WHEN {low32} >= 2147483648 THEN {low32} - 4294967296 "
                      f"ELSE {low32} END AS INT))")
        return (f"CASE WHEN {fld.number} THEN {number} WHEN {fld.k} = 'STRING' AND {fld.t} RLIKE {_INTEGRAL_TEXT} "
                f"THEN try_cast({fld.t} AS {name}) END")
    if name == "DOUBLE":
        trimmed = f"trim(BOTH concat(' ', char(9), char(10), char(13)) FROM {fld.t})"
        return (f"CASE WHEN {fld.number} THEN {fld.get('double')} WHEN {fld.k} = 'STRING' AND {trimmed} RLIKE "
                f"{_DOUBLE_TEXT} THEN try_cast(regexp_replace({trimmed}, '[fFdD]$', '') AS DOUBLE) END")
    if name in ("STRING", "VARCHAR"):
        array = f"concat('[', array_join({fld.get('array<string>')}, ', ', 'null'), ']')"
        return (f"CASE WHEN {fld.k} IS NULL THEN NULL WHEN {fld.k} LIKE 'OBJECT%' THEN to_json({fld.f}) "
                f"WHEN {fld.k} LIKE 'ARRAY%' THEN {array} ELSE {fld.t} END")
    if name in ("DATE", "TIME", "TIMESTAMP"):
        return fld.t
    if name == "DECIMAL":
        return f"CASE WHEN {fld.number} OR {fld.k} = 'STRING' THEN try_cast({fld.t} AS {spark_type(t)}) END"
    if name == "BYTES":
        return f"CASE WHEN {fld.k} = 'STRING' THEN try_to_binary({fld.t}, 'base64') END"
    e = f"`__v{depth}`"
    if name == "ARRAY":
        return (f"CASE WHEN {fld.k} LIKE 'ARRAY%' THEN transform({fld.get('array<variant>')}, {e} -> "
                f"{_read(_Field.of(e), t.items[0], depth + 1)}) END")
    if name == "MAP":
        key = f"`__k{depth}`"
        read = (f"transform_values({fld.get('map<string,variant>')}, ({key}, {e}) -> "
                f"{_read(_Field.of(e), t.items[1], depth + 1)})")
        if t.items[0].name not in ("STRING", "VARCHAR"):
            read = f"transform_keys({read}, ({key}, {e}) -> CAST({key} AS {spark_type(t.items[0])}))"
        return f"CASE WHEN {fld.k} LIKE 'OBJECT%' THEN {read} END"
    if name == "STRUCT" and t.fields:
        s = f"`__s{depth}`"
        body = ", ".join(f"{_sql_text(n)}, {_read(f, ft, depth + 1)}"
                         for (n, ft), f in zip(t.fields, _member_fields(t, s)))
        return (f"CASE WHEN {fld.k} LIKE 'OBJECT%' THEN "
                f"transform({_members(fld, t, depth)}, {s} -> named_struct({body}))[0] END")
    raise ValueError(f"no JSON read for type {name}")


def json_value_sql(target: str, i: int, column: ast.ColumnDef) -> str:
    """Column ``column`` (the ``i``-th of the JSON key or value ``target``, bound by
    :func:`bind_json_fields`) read from the record's one VARIANT parse as ksqlDB's deserializer
    reads it (:func:`_read`), at its :func:`wire_type`: the read the binding made."""
    read = _read_name(target, i)
    return f"{read}.v" if _shares_read(column.type) else read


def sql_type_text(t: ast.SqlType) -> str:
    """A type as ksqlDB's ``SqlSchemaFormatter`` writes it in its messages (INTEGER, STRING;
    struct fields unquoted)."""
    return t.render(lambda name: _TYPE_NAMES.get(name, name), lambda field, text: f"{field} {text}")


def _first_error(errors: str, depth: int) -> str:
    x = f"`__ex{depth}`"
    return f"try_element_at(filter({errors}, {x} -> {x} IS NOT NULL), 1)"


def _nested_error(fld: _Field, t: ast.SqlType, path: str, depth: int) -> str | None:
    """The first element, map value or struct field of a collection its type cannot take (the
    order ksqlDB's deserializer visits them; a map's keys in the variant's order, sorted), with
    its path (``$.A[1]``, ``$.M.k.value``, ``$.S.X``); None when nothing inside is checked."""
    e = f"`__ev{depth}`"
    if t.name == "ARRAY":
        i = f"`__ei{depth}`"
        inner = _error(_Field.of(e), t.items[0], f"concat({path}, '[', {i}, ']')", depth + 1)
        return None if inner is None else _first_error(
            f"transform({fld.get('array<variant>')}, ({e}, {i}) -> {inner})", depth)
    if t.name == "MAP":
        inner = _error(_Field.of(f"{e}.value"), t.items[1], f"concat({path}, '.', {e}.key, '.value')", depth + 1)
        return None if inner is None else _first_error(
            f"transform(map_entries({fld.get('map<string,variant>')}), {e} -> {inner})", depth)
    if t.name == "STRUCT" and t.fields:
        s = f"`__es{depth}`"
        inner_errors = [_error(f, ft, f"concat({path}, {_sql_text('.' + n)})", depth + 1)
                        for (n, ft), f in zip(t.fields, _member_fields(t, s))]
        present = [x for x in inner_errors if x is not None]
        if not present:
            return None
        first = present[0] if len(present) == 1 else f"coalesce({', '.join(present)})"
        return f"transform({_members(fld, t, depth)}, {s} -> {first})[0]"
    return None


def _error(fld: _Field, t: ast.SqlType, path: str, depth: int = 0, value: str | None = None,
           inside: str | None = None) -> str | None:
    """The cause, in ksqlDB's words (``JsonSerdeUtils``'s and the deserializer's, with its path:
    ``path`` is SQL text), of a value ``t`` cannot take, at any depth; null if it can (or is absent
    or null); None when every value reads (a STRING). ``value``: ``fld`` already read as ``t``
    (SQL naming it, so that a text number is not parsed again); ``inside``: a STRUCT's first field
    error already found (:func:`_struct_read`), instead of looking its fields up again."""
    if t.name in ("STRING", "VARCHAR"):               # any JSON value is a string
        return None
    takes = {"BOOLEAN": f"{fld.k} = 'BOOLEAN'", "BYTES": f"{fld.k} = 'STRING'",
             "ARRAY": f"{fld.k} LIKE 'ARRAY%'", "MAP": f"{fld.k} LIKE 'OBJECT%'", "STRUCT": f"{fld.k} LIKE 'OBJECT%'"
             }.get(t.name, f"({fld.number} OR {fld.k} = 'STRING')")
    required = sql_type_text(t)
    at = f"', path: ', {path}"
    cannot_coerce = _sql_text("Can't coerce string to type. targetType: " + required)
    cannot_convert = _sql_text("Can't convert type. sourceType: ")
    coerce = f"concat({cannot_coerce}, {at})"
    whens = [f"WHEN NOT ({takes}) THEN concat({cannot_convert}, {fld.node}, "
             f"{_sql_text(', requiredType: ' + required)}, {at})"]
    # of a JSON type the column takes, yet unreadable: ksqlDB's parse failures
    if t.name in ("INT", "BIGINT", "DOUBLE"):
        read = _read(fld, t, depth) if value is None else value
        whens.append(f"WHEN {fld.k} = 'STRING' AND ({read}) IS NULL THEN {coerce}")
    elif t.name in ("DATE", "TIME", "TIMESTAMP"):       # epoch numbers, or (this server's own) ISO text
        iso = (f"try_to_timestamp({fld.t}, 'HH:mm:ss[.SSS]')" if t.name == "TIME"
               else f"try_cast({fld.t} AS {t.name})")
        whens.append(f"WHEN {fld.k} = 'STRING' AND NOT {fld.t} RLIKE {_INTEGRAL_TEXT} AND {iso} IS NULL THEN {coerce}")
    elif t.name == "BYTES":
        whens.append(f"WHEN try_to_binary({fld.t}, 'base64') IS NULL THEN concat("
                     f"'Value is not a valid Base64 encoded string: ', {fld.t}, {at})")
    elif t.name == "DECIMAL":                         # new BigDecimal(text), then DecimalUtil.ensureFit
        precision, scale = t.params
        exact = f"try_cast({fld.t} AS DECIMAL(38, 18))"
        odd = f"regexp_extract({fld.t}, '[^0-9.eE+-]', 0)"
        whens.append(f"WHEN {exact} IS NULL THEN CASE WHEN {odd} != '' THEN concat('Character ', {odd}, "
                     f"{_sql_text(' is neither a decimal digit number, decimal point, nor ' + chr(34) + 'e' + chr(34))}, "
                     f"' notation exponential mark.', {at}) ELSE concat('Invalid number: ', {fld.t}, {at}) END")
        whens.append(f"WHEN abs({exact}) >= 1E{precision - scale} THEN concat("
                     f"'Numeric field overflow: A field with precision {precision} and scale {scale} must round to an "
                     f"absolute value less than 10^{precision - scale}. Got ', {fld.t}, {at})")
        # the literal's own precision and scale, as BigDecimal counts them (plain notation)
        fraction = f"coalesce(nullif(regexp_extract({fld.t}, '[.]([0-9]*)', 1), ''), '')"
        digits = f"greatest(length(regexp_replace(regexp_replace({fld.t}, '[^0-9]', ''), '^0+', '')), 1)"
        fit = (_sql_text("Cannot fit decimal '"), _sql_text("' into " + required + " without rounding. (Requires "))
        whens.append(f"WHEN {exact} != try_cast({fld.t} AS {spark_type(t)}) THEN concat({fit[0]}, {fld.t}, {fit[1]}, "
                     f"{digits}, ',', length({fraction}), ')', {at})")
    nested = _nested_error(fld, t, path, depth) if inside is None else inside
    if nested is not None:
        whens.append(f"ELSE {nested}")
    return f"CASE WHEN {fld.k} IS NULL THEN NULL {' '.join(whens)} END"


def json_field_error_sql(target: str, i: int, column: ast.ColumnDef, path_text: str | None = None) -> str | None:
    """The cause of a field (the ``i``-th column of the JSON key or value ``target``, bound) that
    ``column`` cannot take, or of anything inside it (:func:`_error`), from the read the binding
    made (:func:`_bound_read`, whose path must be this one); ``path_text``: the deserializer's path
    to the field (``$.NAME``; ``$`` for an unwrapped key)."""
    read = _read_name(target, i)
    shared = _shares_read(column.type)
    return _error(_Field.bound(target, i), column.type, _sql_text(path_text or "$." + column.name),
                  value=None if shared else read, inside=f"{read}.e" if shared else None)


def delimited_fields_sql(raw: str, delimiter: str) -> str:
    """The fields of a DELIMITED record (every one, trailing empty ones too)."""
    delim = re.escape(delimiter).replace("\\", "\\\\").replace("'", "\\'")
    return f"split(CAST({raw} AS STRING), '{delim}', -1)"


def delimited_field_sql(fields: str, i: int, t: ast.SqlType) -> str:
    """Field ``i`` read as the column's wire type: an empty field is null (as ksqlDB reads it),
    text that is no such value is null too (and the record an error: :func:`delimited_error_sql`)."""
    return f"try_cast(nullif(try_element_at({fields}, {i + 1}), '') AS {spark_type(wire_type(t))})"


def delimited_error_sql(raw: str, delimiter: str, columns: Sequence[ast.ColumnDef]) -> str:
    """DELIMITED: a record with another number of fields than columns, or a field its column's
    type cannot read (ksqlDB's ``KsqlDelimitedDeserializer`` fails both)."""
    fields = delimited_fields_sql(raw, delimiter)
    count = (f"WHEN size({fields}) != {len(columns)} THEN concat('Column count mismatch on deserialization. "
             f"expected: {len(columns)}, got: ', size({fields}))")
    checks = [count]
    for i, c in enumerate(columns):
        text = f"nullif(try_element_at({fields}, {i + 1}), '')"
        checks.append(f"WHEN {text} IS NOT NULL AND {delimited_field_sql(fields, i, c.type)} IS NULL THEN "
                      f"concat('Failed to parse ', {text}, ' as {type_name(c.type)} for column {c.name}')")
    return "CASE " + " ".join(checks) + " END"


def avro_key_error_sql(raw: str, undecoded: str) -> str:
    """AVRO keys: a key that the lenient decoder could not read (the boolean column ``undecoded``,
    which it sets), in the words of Confluent's deserializer (not framed: ``Unknown magic byte!``;
    else the id)."""
    schema_id = f"conv(hex(substring({raw}, 2, 4)), 16, 10)"
    return (f"CASE WHEN {undecoded} THEN CASE WHEN length({raw}) < 5 OR substring({raw}, 1, 1) "
            f"!= X'00' THEN 'Unknown magic byte!' ELSE concat('Error deserializing Avro message for id ', "
            f"{schema_id}) END END")


# -- AVRO values the kafkalite source dropped ----------------------------------------------------
#: the kafkalite source's ``malformedRecordHandler`` option for a query's AVRO values
DROPPED_AVRO_HANDLER = "kafkalite.sql.deserialization:log_dropped_avro"


def dropped_avro_args(topic: str, include_rows: bool, log_topic: processing_log.ProcessingLogTopic | None) -> str:
    """The ``malformedRecordHandlerArgs`` option text :func:`log_dropped_avro` reads on a worker."""
    target = None if log_topic is None else [log_topic.bootstrap_servers, log_topic.topic,
                                             [list(p) for p in log_topic.security_properties]]
    return json.dumps({"topic": topic, "include_rows": include_rows, "log_topic": target})


def avro_cause(data: bytes | None) -> str:
    """Confluent's Avro deserializer's words for bytes it cannot read: not framed (``Unknown magic
    byte!``), else the schema id it could not deserialize with."""
    if data is None or len(data) < 5 or data[0] != 0:
        return "Unknown magic byte!"
    return f"Error deserializing Avro message for id {int.from_bytes(data[1:5], 'big')}"


def log_dropped_avro(args: str, record: Any) -> None:
    """The kafkalite source's ``malformedRecordHandler`` for a query's AVRO values: the record it
    dropped (``spark_integration.avro.MalformedRecord``) logged as ksqlDB logs a deserialization
    error (:func:`log_error`, in Confluent's deserializer's words: :func:`avro_cause`) and produced
    to the processing-log topic if one is given (``args``: :func:`dropped_avro_args`). The source's
    own message (offset, schema ids, the decoder's error) stays in its log."""
    settings = json.loads(args)
    target = settings.get("log_topic")
    if target is not None:
        processing_log.attach(processing_log.ProcessingLogTopic(
            target[0], target[1], tuple((str(k), str(v)) for k, v in target[2])))
    log_error(record.field, settings["topic"], avro_cause(record.data), record.data, bool(settings["include_rows"]),
              record.partition, record.offset)
    if target is not None:
        processing_log.flush()                       # written before the read goes on (a worker may exit)


def error_sql(raw: str, fmt: str, columns: Sequence[ast.ColumnDef], delimiter: str = ",",
              unwrapped: bool = False, fields: str | None = None) -> str | None:
    """The cause of a key (``raw`` = ``key``) or value that ``fmt`` cannot read, null if it reads
    (or is null); None for a format checked elsewhere (AVRO) or with nothing to check. ``fields``:
    JSON fields bound by :func:`bind_json_fields` for this target, checked against their columns."""
    if not columns:
        return None
    if fmt == "KAFKA" and len(columns) == 1:
        check = kafka_error_sql(raw, columns[0].type)
    elif fmt == "JSON":
        check = json_error_sql(raw, unwrapped, columns, fields)
    elif fmt == "DELIMITED":
        check = delimited_error_sql(raw, delimiter, columns)
    else:
        return None
    return None if check is None else f"CASE WHEN {raw} IS NOT NULL THEN {check} END"


# -- skipping (or failing) in the query --------------------------------------------------------
def skip_or_fail(frame: Any, topic: str, fail: bool, include_rows: bool,
                 log_topic: processing_log.ProcessingLogTopic | None = None) -> Any:
    """``frame`` (with ``__deser_error``, ``__deser_target``, ``__deser_record``, ROWPARTITION and
    ROWOFFSET) without its poison records, each logged (and produced to ``log_topic`` if given);
    with ``fail`` the query fails on the first one instead, as ksqlDB's does with
    ``ksql.fail.on.deserialization.error=true``."""
    if fail:
        kept = frame.where("`__deser_error` IS NULL OR raise_error(concat('Failed to deserialize ', "
                           f"`__deser_target`, ' from topic: ', {_sql_text(topic)}, '. ', `__deser_error`)) IS NULL")
    else:
        from pyspark.sql.functions import arrow_udf
        from pyspark.sql.types import BooleanType

        # one function per topic and setting, registered on the frame's session (as avro_keys' are);
        # an Arrow function: the good records cost one vectorised null check per batch, no Python each
        name = "ksql_processing_log_" + hashlib.sha1(f"{topic}\0{include_rows}\0{log_topic}".encode()).hexdigest()[:16]
        # (pyspark's stubs list only the forms with a functionType, which Spark 4 deprecates for hints)
        logger = _arrow_function(_Logger(topic, include_rows, log_topic))
        function = arrow_udf(logger, BooleanType())  # type: ignore[call-overload]
        frame.sparkSession.udf.register(name, function)
        # a good record's bytes and target go to Python as nulls: only a poison record's are read
        def if_bad(column: str) -> str:
            return f"CASE WHEN `__deser_error` IS NOT NULL THEN {column} END"
        kept = frame.where(f"{name}(`__deser_error`, {if_bad('`__deser_target`')}, `ROWPARTITION`, `ROWOFFSET`, "
                           f"{if_bad('`__deser_record`')})")
    return kept.drop("__deser_error", "__deser_target", "__deser_record")


def _arrow_function(logger: "_Logger") -> Callable[[Any, Any, Any, Any, Any], Any]:
    """``logger`` as a function whose type hints say arrays to array, as Spark's Arrow UDFs want."""
    import pyarrow as pa

    def log_batch(cause: Any, target: Any, partition: Any, offset: Any, record: Any) -> Any:
        return logger(cause, target, partition, offset, record)
    log_batch.__annotations__ = {**{n: pa.Array for n in ("cause", "target", "partition", "offset", "record")},
                                 "return": pa.Array}
    return log_batch


class _Logger:
    """The executors' side of :func:`skip_or_fail`, on Arrow arrays of a batch of records: true
    for each record that reads; each other one is logged and false."""

    def __init__(self, topic: str, include_rows: bool,
                 log_topic: processing_log.ProcessingLogTopic | None = None) -> None:
        self.topic, self.include_rows, self.log_topic = topic, include_rows, log_topic

    def __call__(self, cause: Any, target: Any, partition: Any, offset: Any, record: Any) -> Any:
        import pyarrow.compute as pc

        if cause.null_count == len(cause):           # the usual batch: every record reads
            return pc.is_null(cause)
        if self.log_topic is not None:               # this worker's appender, made once per process
            processing_log.attach(self.log_topic)
        for i in pc.indices_nonzero(pc.is_valid(cause)).to_pylist():
            data = record[i].as_py()
            log_error(target[i].as_py() or "value", self.topic, cause[i].as_py(), data, self.include_rows,
                      partition[i].as_py(), offset[i].as_py())
        if self.log_topic is not None:
            processing_log.flush()                   # written before the batch goes on (a worker may exit)
        return pc.is_null(cause)
